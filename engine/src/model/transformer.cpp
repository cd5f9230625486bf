// The transformer's forward and backward passes; see transformer.h.
#include "tessera/engine/model/transformer.h"

#include <cmath>
#include <algorithm>
#include <random>
#include <type_traits>

#include "tessera/engine/ops/activation.h"
#include "tessera/engine/ops/attention.h"
#include "tessera/engine/ops/cross_entropy.h"
#include "tessera/engine/ops/embedding.h"
#include "tessera/engine/ops/layernorm.h"
#include "tessera/engine/ops/linear.h"
#include "tessera/engine/ops/residual.h"
#include "tessera/engine/ops/rope.h"
#include "tessera/engine/model/initialization.h"
#include "tessera/engine/model/parameter_slots.h"
#include "tessera/planner/activations.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine {

using namespace cpu;
using planner::ModelFamily;


namespace {

// The precision whose activation table describes what a Transformer<T> keeps
// (double, for gradient checks, keeps fp32's elements in wider storage).
template <typename T>
planner::Precision storage_precision() {
  if constexpr (std::is_same_v<T, bf16>) return planner::Precision::bf16;
  if constexpr (std::is_same_v<T, fp16>) return planner::Precision::fp16;
  return planner::Precision::fp32;
}

}  // namespace

template <typename T>
Result<Transformer<T>> Transformer<T>::create(const planner::Model& model, MemoryLedger& ledger, int64_t micro_batch, int64_t seq_len,
                                              uint64_t seed, planner::BlockRecompute recompute, FlatStorage storage, comm::Communicator* tensor_group,
                                              bool sequence_parallel, planner::PipelinePlacement stage, comm::Communicator* context_group,
                                              TpCommunication tp_communication) {
  const auto& c = model.config;
  if (Status s = check_engine_computes(c, seq_len); !s) return s.error();
  const TensorParallel tp(tensor_group, sequence_parallel, tp_communication);
  const ContextParallel cp(context_group);
  if (tp.sequence_parallel()) {
    if (Status s = check_sequence_split(micro_batch, seq_len, tp.size(), cp.size()); !s) return s.error();
  }
  if (!planner::tp_divides_model(c, tp.size())) {
    return make_error(ErrorCode::unsupported, "--tp " + std::to_string(tp.size()) + ": the engine gives each tensor-parallel rank whole attention and "
                                              "key-value heads and an equal share of the MLP; the model has " + std::to_string(c.num_heads) + " heads, " +
                                              std::to_string(c.num_kv_heads) + " key-value heads and an MLP of " + std::to_string(c.intermediate_size) +
                                              "; choose a --tp that divides all three");
  }
  if (micro_batch <= 0 || seq_len <= 0) return make_error(ErrorCode::invalid_argument, "micro-batch and sequence length must be positive");
  if (Status s = planner::check_context_parallel_sequence(seq_len * cp.size(), cp.size(), planner::ActivationProfile::tessera); !s) return s.error();
  if (c.learned_positions && seq_len * cp.size() > c.max_positions) {
    return make_error(ErrorCode::invalid_argument,
                      "--seq " + std::to_string(seq_len * cp.size()) + " exceeds the model's " + std::to_string(c.max_positions) + " positions");
  }
  const auto chunks = planner::stage_chunks(static_cast<int>(c.num_layers), static_cast<int>(stage.pp), static_cast<int>(stage.chunks));
  for (const planner::StageLayers& chunk : chunks[static_cast<size_t>(stage.stage)]) {
    if (chunk.num_layers == 0) {
      return make_error(ErrorCode::invalid_argument, "--pp " + std::to_string(stage.pp) + ": the model's " + std::to_string(c.num_layers) +
                                                         " blocks leave a model chunk of stage " + std::to_string(stage.stage) +
                                                         " without blocks; choose fewer stages or model chunks");
    }
  }
  configure_blas_threads();
  Transformer t;
  t.tp_ = tp;
  t.cp_ = cp;
  t.recompute_ = recompute;
  t.stage_ = stage;
  t.chunks_ = chunks[static_cast<size_t>(stage.stage)];
  t.build(model, ledger, micro_batch, seq_len, seed, storage);
  return t;
}

template <typename T>
void Transformer<T>::build(const planner::Model& model, MemoryLedger& ledger, int64_t micro_batch, int64_t seq_len, uint64_t seed,
                           FlatStorage storage) {
  config_ = model.config;
  B_ = micro_batch;
  T_ = seq_len;
  const auto& c = config_;
  const int L = static_cast<int>(c.num_layers);
  // This rank's part of each tensor (all of it on one rank) of its stage's tensors.
  const planner::TensorInventory inventory = planner::tp_rank_inventory(planner::stage_inventory(model.inventory, L, stage_), tp_.size());
  const auto& tensors = inventory.tensors;
  flat_order_ = planner::flat_parameter_order(inventory);
  if (storage.flat_buffers) {
    const int64_t flat_numel = std::max(inventory.parameter_count(), storage.padded_numel);
    flat_params_ = Tensor<T>(ledger, MemoryCategory::parameters, flat_numel);
    if (storage.flat_gradients) flat_grads_ = Tensor<T>(ledger, storage.gradient_category, flat_numel);
    T* p = flat_params_.data();
    if (p != nullptr) {
      for_each_initial_value_of_part(model, seed, tp_.size(), tp_.rank(), stage_,
                                     [p](int64_t i, double value) { p[i] = narrow<T>(static_cast<W>(value)); });
    }
  }
  ties_embedding_ = std::any_of(model.inventory.tensors.begin(), model.inventory.tensors.end(), [](const planner::TensorInfo& t) { return t.tied_to >= 0; });
  const ParameterSlots slots = parameter_slots(inventory, L);
  for (const auto& info : tensors) {
    if (info.tied_to >= 0) continue;
    const planner::FlatParameter& flat = flat_order_[params_.size()];
    params_.emplace_back(storage.flat_buffers ? flat_params_.data() + flat.offset : nullptr, info.numel());
    grads_.emplace_back(storage.flat_buffers && storage.flat_gradients ? flat_grads_.data() + flat.offset : nullptr, info.numel());
    names_.push_back(info.name);
    shapes_.push_back(info.shape);
  }
  layers_ = slots.blocks;
  wte_ = slots.wte, wpe_ = slots.wpe, final_norm_w_ = slots.final_norm_w, final_norm_b_ = slots.final_norm_b, head_ = slots.head;
  // What the forward keeps, sized by the planner's table: one source for both.
  const planner::Precision precision = storage_precision<T>();
  ledger_ = &ledger;
  buffers_ = activation_buffers(planner::activation_table(c, planner::ActivationProfile::tessera, precision), activation_shape(), recompute_);
  if (stage_.pp == 1) own_pass_ = allocate_pass(0);
  working_ = allocate(buffers_.working);
  scratch_ = allocate(buffers_.scratch);
  workspace_ = cpu::Workspace<W>(ledger, T_, c.head_dim, precision);
}

template <typename T>
typename Transformer<T>::Buffers Transformer<T>::allocate(const std::vector<ActivationBuffer>& wanted) {
  Buffers buffers;
  for (const ActivationBuffer& buffer : wanted) {
    if (is_16_bit<T> && buffer.bytes_per_element == 4) {
      buffers.wide.emplace_back(std::string(buffer.name), Tensor<W>(*ledger_, buffer.category, buffer.elements()));
    } else {
      buffers.narrow.emplace_back(std::string(buffer.name), Tensor<T>(*ledger_, buffer.category, buffer.elements()));
    }
  }
  return buffers;
}

template <typename T>
typename Transformer<T>::Pass Transformer<T>::allocate_pass(int chunk) {
  Pass pass;
  pass.blocks.resize(static_cast<size_t>(config_.num_layers));
  const planner::StageLayers& layers = chunk_layers(chunk);
  for (int i = 0; i < layers.num_layers; ++i) pass.blocks[static_cast<size_t>(layers.first_layer + i)] = allocate(buffers_.kept_by(i));
  if (chunk_has_head(chunk)) {
    pass.last_stage = allocate(buffers_.last_stage);
    pass.logits = allocate(buffers_.logits);
  }
  return pass;
}

template <typename T>
void Transformer<T>::begin_pass(int chunk, int64_t micro) {
  if (stage_.pp > 1) passes_.emplace(std::pair{chunk, micro}, allocate_pass(chunk));
}

template <typename T>
void Transformer<T>::end_pass(int chunk, int64_t micro) {
  if (stage_.pp > 1) passes_.erase(std::pair{chunk, micro});
}

template <typename T>
typename Transformer<T>::Pass& Transformer<T>::pass_of(int chunk, int64_t micro) {
  return stage_.pp > 1 ? passes_.at(std::pair{chunk, micro}) : own_pass_;
}

namespace {

template <typename T>
T* find(std::vector<std::pair<std::string, Tensor<T>>>& buffers, const char* name) {
  for (auto& [key, tensor] : buffers) {
    if (key == name) return tensor.data();
  }
  return nullptr;
}

// An fp32 buffer: among the wide ones in mixed precision, else with the rest.
template <typename Buffers>
auto find_wide(Buffers& buffers, const char* name) {
  if constexpr (std::is_same_v<decltype(buffers.narrow), decltype(buffers.wide)>) {
    auto* found = find(buffers.narrow, name);
    return found != nullptr ? found : find(buffers.wide, name);
  } else {
    return find(buffers.wide, name);
  }
}

}  // namespace

// A block's tensor: its own if the block keeps it, else the shared working copy.
template <typename T>
T* Transformer<T>::act(int layer, const char* name) {
  T* kept = find(current_->blocks[static_cast<size_t>(layer)].narrow, name);
  return kept != nullptr ? kept : find(working_.narrow, name);
}

template <typename T>
typename Transformer<T>::W* Transformer<T>::stats(int layer, const char* name) {
  W* kept = find_wide(current_->blocks[static_cast<size_t>(layer)], name);
  return kept != nullptr ? kept : find_wide(working_, name);
}

// Rebuilds what block l did not keep. Deterministic ops on the same inputs give
// the same values, so gradients do not depend on the recompute mode.
// Recomputing a whole block, its output is not needed (the next block's
// input is kept, or belongs to the next stage): it goes into grad_narrow,
// whose contents are dead until the block's backward writes them.
template <typename T>
void Transformer<T>::recompute_block(int l, int index_in_chunk) {
  const BlockRerun rerun = buffers_.rerun_of(index_in_chunk);
  if (rerun == BlockRerun::block) {
    block_forward(l, act(l, "block_input"), find(scratch_.narrow, "grad_narrow"));
  } else if (rerun == BlockRerun::attention) {
    attention_forward(l, qkv_views(act(l, "qkv")));
  }
}

// The ring attention's buffers, from the planner's ring_* terms (empty without context parallelism).
template <typename T>
RingBuffers<T> Transformer<T>::ring_buffers() {
  if (cp_.size() == 1) return {};
  return ring_buffers_from<T>(ring_kv_block(activation_shape(), config_.kv_width()), [this](const char* name) { return find(scratch_.narrow, name); },
                              [this](const char* name) { return find_wide(scratch_, name); });
}

// Block l's attention core, over its whole sequences under context parallelism.
template <typename T>
void Transformer<T>::attention_forward(int l, const QkvViews& qkv) {
  cp_.attention_forward(act(l, "attention_output"), stats(l, "attention_lse"), qkv.q, qkv.k, qkv.v, qkv.shape, ring_buffers(), workspace_);
}

template <typename T>
typename Transformer<T>::W* Transformer<T>::find_logits() {
  return find_wide(current_->logits, "logits_fp32");
}

// The unit hooks in the order forward() and backward() call them, with
// nothing computed in between: a dry run's micro-batch of the whole model.
template <typename T>
void Transformer<T>::hooks_only_pass() {
  if (hooks_ == nullptr) return;
  const int L = static_cast<int>(config_.num_layers);
  for (int l = planner::kEmbeddingLayer; l <= L; ++l) {
    hooks_->before_forward(l);
    hooks_->after_forward(l);
  }
  for (int l = L; l >= planner::kEmbeddingLayer; --l) {
    hooks_->before_backward(l);
    hooks_->after_backward(l);
  }
}

template <typename T>
Slice<T> Transformer<T>::tied_embedding_gradient() {
  if (stage_.pp == 1 || !ties_embedding_) return Slice<T>(nullptr, 0);
  if (stage_.first()) return grads_[static_cast<size_t>(wte_)];
  if (stage_.last()) return grads_[static_cast<size_t>(head_)];
  return Slice<T>(nullptr, 0);
}

template <typename T>
void Transformer<T>::zero_gradients() {
  flat_grads_.zero();
}

template <typename T>
double Transformer<T>::forward_chunk(int chunk, int64_t micro, const int32_t* tokens, const int32_t* targets, const T* input, T* output) {
  const auto& c = config_;
  const int64_t N = B_ * T_, Nl = tp_.local_rows(N), C = c.hidden_size;
  const int L = static_cast<int>(c.num_layers);
  const planner::StageLayers& layers = chunk_layers(chunk);
  const int first = layers.first_layer, end = first + layers.num_layers;
  current_ = &pass_of(chunk, micro);
  current_->tokens = tokens;
  current_->targets = targets;
  T* embedded = act(first, "block_input");
  if (chunk_has_embedding(chunk)) {
    if (hooks_ != nullptr) hooks_->before_forward(planner::kEmbeddingLayer);
    const cpu::VocabSlice vocab{tp_.vocab_begin(c.vocab_size), tp_.vocab_valid(c.vocab_size)};
    // Each rank looks up the tokens of its vocabulary rows; the sum over the group is the embedding.
    T* lookups = tp_.sequence_parallel() ? sequence_buffer() : embedded;
    embedding_forward(lookups, tokens, param(wte_), B_, T_, C, vocab);
    reduce_rows(lookups, embedded);
    if (wpe_ >= 0) position_embedding_forward(embedded, param(wpe_), Nl, T_, C, tp_.first_row(N), cp_.split());
    if (hooks_ != nullptr) hooks_->after_forward(planner::kEmbeddingLayer);
  } else {
    std::copy(input, input + Nl * C, embedded);
  }
  for (int l = first; l < end; ++l) {
    if (hooks_ != nullptr) hooks_->before_forward(l);
    T* out = l + 1 < end ? act(l + 1, "block_input") : l + 1 < L ? output : find(current_->last_stage.narrow, "final_norm_input");
    block_forward(l, act(l, "block_input"), out);
    if (hooks_ != nullptr) hooks_->after_forward(l);
  }
  if (!chunk_has_head(chunk)) return 0;
  if (hooks_ != nullptr) hooks_->before_forward(L);
  head_forward();
  if (hooks_ != nullptr) hooks_->after_forward(L);
  const W* losses = find_wide(current_->logits, "token_losses");
  double mean = 0;
  for (int64_t i = 0; i < N; ++i) mean += static_cast<double>(losses[i]);
  return mean / static_cast<double>(N);
}

// The final norm, the head and the loss of the current pass.
template <typename T>
void Transformer<T>::head_forward() {
  const auto& c = config_;
  const int64_t N = B_ * T_, Nl = tp_.local_rows(N), C = c.hidden_size, V = tp_.vocab_rows(c.vocab_size);
  const cpu::VocabSlice vocab{tp_.vocab_begin(c.vocab_size), tp_.vocab_valid(c.vocab_size)};
  T* x = find(current_->last_stage.narrow, "final_norm_input");
  W* norm_stats = find_wide(current_->last_stage, "final_norm_stats");
  T* h = find(current_->last_stage.narrow, "head_input");
  if (c.norm == planner::NormKind::layer_norm) {
    layernorm_forward(h, norm_stats, norm_stats + Nl, x, param(final_norm_w_), final_norm_b_ >= 0 ? param(final_norm_b_) : nullptr, Nl, C, W(c.norm_eps));
  } else {
    rmsnorm_forward(h, norm_stats, x, param(final_norm_w_), Nl, C, W(c.norm_eps));
  }
  W* logits = find_logits();
  W* losses = find_wide(current_->logits, "token_losses");
  linear_forward(logits, whole_rows(h, sequence_buffer()), param(head_), static_cast<const T*>(nullptr), N, C, V, WeightLayout::out_in, workspace_);
  cross_entropy_forward(losses, logits, current_->targets, N, V, vocab,
                        [this](W* values, int64_t n, comm::ReduceOp op) { tp_.all_reduce(values, n, op); });
}

// This rank's activations: B_ sequences of its T_ tokens, over its tp and cp groups.
template <typename T>
planner::ActivationShape Transformer<T>::activation_shape() const {
  return planner::ActivationShape{B_, T_, tp_.size(), tp_.sequence_parallel(), cp_.size(), tp_.overlapped()};
}

template <typename T>
typename Transformer<T>::LocalWidths Transformer<T>::local_widths() const {
  const auto& c = config_;
  const int64_t tp = tp_.size();
  return LocalWidths{c.num_heads / tp, c.num_kv_heads / tp, c.q_width() / tp, c.kv_width() / tp, c.intermediate_size / tp};
}

// Where q, k and v lie in the block's "qkv" buffer: GPT-2's fused projection
// writes them side by side in each token's row, Llama's three projections one
// after another.
template <typename T>
typename Transformer<T>::QkvViews Transformer<T>::qkv_views(T* qkv) const {
  const LocalWidths w = local_widths();
  const int64_t N = B_ * T_;
  if (config_.family == ModelFamily::gpt2) {
    const int64_t row = 3 * w.q;
    return QkvViews{qkv, qkv + w.q, qkv + 2 * w.q, AttentionShape{B_, T_, w.heads, w.kv_heads, config_.head_dim, row, row}};
  }
  return QkvViews{qkv, qkv + N * w.q, qkv + N * (w.q + w.kv), AttentionShape{B_, T_, w.heads, w.kv_heads, config_.head_dim, w.q, w.kv}};
}

// A row-parallel layer's bias is whole on every rank: added by rank 0 alone,
// it enters the all-reduced sum once.
template <typename T>
const T* Transformer<T>::row_parallel_bias(int index) {
  return index >= 0 && tp_.rank() == 0 ? param(index) : nullptr;
}

template <typename T>
T* Transformer<T>::sequence_buffer() {
  return find(scratch_.narrow, "sequence_gathered");
}

template <typename T>
T* Transformer<T>::sequence_gradient_buffer() {
  return find(scratch_.narrow, "sequence_gathered_grad");
}

// Under sequence parallelism: every rank's rows of `rows` gathered into
// `buffer` (the whole sequence); else `rows` is whole already.
template <typename T>
const T* Transformer<T>::whole_rows(const T* rows, T* buffer) {
  if (!tp_.sequence_parallel()) return rows;
  const int64_t N = B_ * T_;
  tp_.all_gather(rows, buffer, tp_.local_rows(N) * config_.hidden_size);
  return buffer;
}

// A split layer's partial (N, h) result summed over the group: reduce-
// scattered from `whole` into this rank's rows `mine` under sequence
// parallelism, else all-reduced in place (whole == mine).
template <typename T>
void Transformer<T>::reduce_rows(T* whole, T* mine) {
  const int64_t N = B_ * T_, C = config_.hidden_size;
  if (tp_.sequence_parallel()) {
    tp_.reduce_scatter(whole, mine, tp_.local_rows(N) * C);
  } else {
    tp_.all_reduce(mine, N * C);
  }
}

template <typename T>
template <typename Gemms>
const T* Transformer<T>::gathered_gemms(const T* mine, T* buffer, Gemms gemms) {
  const int64_t N = B_ * T_, Nl = tp_.local_rows(N), C = config_.hidden_size;
  if (!tp_.overlapped()) {
    const T* whole = whole_rows(mine, buffer);
    gemms(int64_t{0}, N, whole);
    return whole;
  }
  tp_.all_gather_overlapped(HostChunks{}, mine, buffer, Nl * C, [&](int64_t chunk) { gemms(chunk * Nl, Nl, buffer + chunk * Nl * C); });
  return buffer;
}

template <typename T>
template <typename Gemms>
void Transformer<T>::reduced_gemms(T* whole, T* mine, Gemms gemms) {
  const int64_t N = B_ * T_, Nl = tp_.local_rows(N), C = config_.hidden_size;
  if (!tp_.overlapped()) {
    gemms(int64_t{0}, N, whole);
    reduce_rows(whole, mine);
    return;
  }
  tp_.reduce_scatter_overlapped(HostChunks{}, whole, find(scratch_.narrow, "sequence_overlap_send"), mine, Nl * C,
                                [&](int64_t chunk, T* into) { gemms(chunk * Nl, Nl, into); });
}

template <typename T>
void Transformer<T>::block_forward(int l, const T* x, T* out) {
  const auto& c = config_;
  const Layer& w = layers_[static_cast<size_t>(l)];
  const LocalWidths local = local_widths();
  const int64_t N = B_ * T_, Nl = tp_.local_rows(N), C = c.hidden_size, I = local.mlp;
  const bool gpt2 = c.family == ModelFamily::gpt2;
  const bool sp = tp_.sequence_parallel();
  auto norm = [&](T* y, W* statistics, const T* in, int weight, int bias) {
    if (c.norm == planner::NormKind::layer_norm) {
      layernorm_forward(y, statistics, statistics + Nl, in, param(weight), bias >= 0 ? param(bias) : nullptr, Nl, C, W(c.norm_eps));
    } else {
      rmsnorm_forward(y, statistics, in, param(weight), Nl, C, W(c.norm_eps));
    }
  };
  auto bias = [&](int index) -> const T* { return index >= 0 ? param(index) : nullptr; };
  const WeightLayout layout = gpt2 ? WeightLayout::in_out : WeightLayout::out_in;
  T* ln1 = act(l, "attn_norm_output");
  norm(ln1, stats(l, "attn_norm_stats"), x, w.attn_norm_w, w.attn_norm_b);
  const QkvViews qkv = qkv_views(act(l, "qkv"));
  T* att = act(l, "attention_output");
  T* mid = act(l, "mlp_norm_input");  // the residual stream after attention
  T* attention_out = sp ? sequence_buffer() : mid;  // the row-parallel output before its sum (the gathered ln1 is used up)
  // Rows [r0, r0 + rows) of the column-parallel projections, from those rows of the norm's output.
  gathered_gemms(ln1, sequence_buffer(), [&](int64_t r0, int64_t rows, const T* in) {
    if (gpt2) {
      linear_forward(qkv.q + r0 * qkv.shape.q_stride, in, param(w.qkv_w), bias(w.qkv_b), rows, C, 3 * local.q, layout, workspace_);
    } else {
      linear_forward(qkv.q + r0 * local.q, in, param(w.q_w), bias(w.q_b), rows, C, local.q, layout, workspace_);
      linear_forward(qkv.k + r0 * local.kv, in, param(w.k_w), bias(w.k_b), rows, C, local.kv, layout, workspace_);
      linear_forward(qkv.v + r0 * local.kv, in, param(w.v_w), bias(w.v_b), rows, C, local.kv, layout, workspace_);
    }
  });
  if (!gpt2) {
    const auto rotary = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.rotary_pct);
    rope_rotate(qkv.q, B_, T_, local.heads, c.head_dim, local.q, rotary, c.rope_theta, false, cp_.split());
    rope_rotate(qkv.k, B_, T_, local.kv_heads, c.head_dim, local.kv, rotary, c.rope_theta, false, cp_.split());
  }
  attention_forward(l, qkv);
  reduced_gemms(attention_out, mid, [&](int64_t r0, int64_t rows, T* into) {
    linear_forward(into, att + r0 * local.q, param(w.o_w), row_parallel_bias(w.o_b), rows, local.q, C, layout, workspace_);
  });
  add_in_place(mid, x, Nl * C);
  T* ln2 = act(l, "mlp_norm_output");
  norm(ln2, stats(l, "mlp_norm_stats"), mid, w.mlp_norm_w, w.mlp_norm_b);
  T* hidden = act(l, "mlp_activation");
  T* mlp_out = sp ? sequence_buffer() : out;  // the gathered ln2 is used up before the down projection writes it
  T* pre = gpt2 ? act(l, "mlp_pre_activation") : nullptr;
  T* gate = gpt2 ? nullptr : act(l, "mlp_gate");
  T* up = gpt2 ? nullptr : act(l, "mlp_up");
  gathered_gemms(ln2, sequence_buffer(), [&](int64_t r0, int64_t rows, const T* in) {
    if (gpt2) {
      linear_forward(pre + r0 * I, in, param(w.fc_w), bias(w.fc_b), rows, C, I, layout, workspace_);
    } else {
      linear_forward(gate + r0 * I, in, param(w.gate_w), static_cast<const T*>(nullptr), rows, C, I, layout, workspace_);
      linear_forward(up + r0 * I, in, param(w.up_w), static_cast<const T*>(nullptr), rows, C, I, layout, workspace_);
    }
  });
  if (gpt2) {
    gelu_forward(hidden, pre, N * I);
  } else {
    swiglu_forward(hidden, gate, up, N * I);
  }
  const int down = gpt2 ? w.proj_w : w.down_w;
  const T* down_bias = gpt2 ? row_parallel_bias(w.proj_b) : nullptr;
  reduced_gemms(mlp_out, out, [&](int64_t r0, int64_t rows, T* into) {
    linear_forward(into, hidden + r0 * I, param(down), down_bias, rows, I, C, layout, workspace_);
  });
  add_in_place(out, mid, Nl * C);
}

template <typename T>
void Transformer<T>::backward_chunk(int chunk, int64_t micro, W loss_scale, const T* output_grad, T* input_grad) {
  const auto& c = config_;
  const int64_t N = B_ * T_, Nl = tp_.local_rows(N), C = c.hidden_size;
  const int L = static_cast<int>(c.num_layers);
  const planner::StageLayers& layers = chunk_layers(chunk);
  current_ = &pass_of(chunk, micro);
  T* dres = find(scratch_.narrow, "grad_residual");
  if (chunk_has_head(chunk)) {
    if (hooks_ != nullptr) hooks_->before_backward(L);
    head_backward(loss_scale);
    if (hooks_ != nullptr) hooks_->after_backward(L);
  } else {
    std::copy(output_grad, output_grad + Nl * C, dres);
  }
  for (int l = layers.first_layer + layers.num_layers - 1; l >= layers.first_layer; --l) {
    if (hooks_ != nullptr) hooks_->before_backward(l);
    recompute_block(l, l - layers.first_layer);
    block_backward(l);
    if (hooks_ != nullptr) hooks_->after_backward(l);
  }
  if (!chunk_has_embedding(chunk)) {
    std::copy(dres, dres + Nl * C, input_grad);
    return;
  }
  if (hooks_ != nullptr) hooks_->before_backward(planner::kEmbeddingLayer);
  const cpu::VocabSlice vocab{tp_.vocab_begin(c.vocab_size), tp_.vocab_valid(c.vocab_size)};
  // Every token's gradient, for the lookups of this rank's vocabulary rows.
  const T* dembedded = whole_rows(dres, sequence_gradient_buffer());
  embedding_backward(grad(wte_), dembedded, current_->tokens, B_, T_, C, vocab);
  if (wpe_ >= 0) position_embedding_backward(grad(wpe_), dembedded, B_, T_, C, cp_.split());
  if (hooks_ != nullptr) hooks_->after_backward(planner::kEmbeddingLayer);
}

// From the loss to the gradient of the final norm's input, in grad_residual.
template <typename T>
void Transformer<T>::head_backward(W loss_scale) {
  const auto& c = config_;
  const int64_t N = B_ * T_, Nl = tp_.local_rows(N), C = c.hidden_size, V = tp_.vocab_rows(c.vocab_size);
  const cpu::VocabSlice vocab{tp_.vocab_begin(c.vocab_size), tp_.vocab_valid(c.vocab_size)};
  const bool sp = tp_.sequence_parallel();
  T* dres = find(scratch_.narrow, "grad_residual");
  T* dnarrow = find(scratch_.narrow, "grad_narrow");
  std::fill(dres, dres + Nl * C, T{});
  W* logits = find_logits();
  cross_entropy_backward(logits, current_->targets, N, V, loss_scale / static_cast<W>(N), vocab);
  T* h = find(current_->last_stage.narrow, "head_input");
  T* dh = sp ? sequence_gradient_buffer() : dnarrow;  // partial: each rank's vocabulary rows give part of it
  linear_backward(dh, grad(head_), static_cast<T*>(nullptr), logits, whole_rows(h, sequence_buffer()), param(head_), N, C, V, WeightLayout::out_in,
                  workspace_);
  reduce_rows(dh, dnarrow);
  T* x = find(current_->last_stage.narrow, "final_norm_input");
  W* norm_stats = find_wide(current_->last_stage, "final_norm_stats");
  if (c.norm == planner::NormKind::layer_norm) {
    layernorm_backward(dres, grad(final_norm_w_), final_norm_b_ >= 0 ? grad(final_norm_b_) : nullptr, dnarrow, x, param(final_norm_w_), norm_stats,
                       norm_stats + Nl, Nl, C);
  } else {
    rmsnorm_backward(dres, grad(final_norm_w_), dnarrow, x, param(final_norm_w_), norm_stats, Nl, C);
  }
}

// dres holds the gradient of the block's output (this rank's rows under
// sequence parallelism); it leaves holding the gradient of its input.
template <typename T>
void Transformer<T>::block_backward(int l) {
  const auto& c = config_;
  const Layer& w = layers_[static_cast<size_t>(l)];
  const LocalWidths local = local_widths();
  const int64_t N = B_ * T_, Nl = tp_.local_rows(N), C = c.hidden_size, I = local.mlp;
  const bool gpt2 = c.family == ModelFamily::gpt2;
  const bool sp = tp_.sequence_parallel();
  T* dres = find(scratch_.narrow, "grad_residual");
  T* dnarrow = find(scratch_.narrow, "grad_narrow");
  T* dwide = find(scratch_.narrow, "grad_widest");
  // The norm's input gradient, written whole and partial by the column-parallel layers above it.
  T* dnorm_whole = sp ? sequence_gradient_buffer() : dnarrow;
  auto gbias = [&](int index) -> T* { return index >= 0 ? grad(index) : nullptr; };
  const WeightLayout layout = gpt2 ? WeightLayout::in_out : WeightLayout::out_in;
  // dnarrow = this rank's rows of the sum of the column-parallel input gradients, and the norm's backward from it.
  auto norm_backward = [&](const T* in, const W* statistics, int weight, int bias, auto input_gradients) {
    reduced_gemms(dnorm_whole, dnarrow, input_gradients);
    if (c.norm == planner::NormKind::layer_norm) {
      layernorm_backward(dres, grad(weight), gbias(bias), dnarrow, in, param(weight), statistics, statistics + Nl, Nl, C);
    } else {
      rmsnorm_backward(dres, grad(weight), dnarrow, in, param(weight), statistics, Nl, C);
    }
  };
  // MLP: out = mid + down(act(ln2(mid))). The row-parallel down projection's
  // input gradient, row by row from the gathered output gradient; its weight
  // gradient needs every row.
  T* hidden = act(l, "mlp_activation");
  T* dhidden = gpt2 ? dwide : dwide + N * I;  // SwiGLU: the up projection's half (dgate, dup)
  const int down = gpt2 ? w.proj_w : w.down_w;
  const T* dout = gathered_gemms(dres, sequence_gradient_buffer(), [&](int64_t r0, int64_t rows, const T* in) {
    linear_backward_input(dhidden + r0 * I, in, param(down), rows, I, C, layout, workspace_);
  });
  linear_backward_weight(grad(down), gpt2 ? gbias(w.proj_b) : nullptr, dout, hidden, N, I, C, layout, workspace_);
  if (gpt2) {
    gelu_backward(dwide, act(l, "mlp_pre_activation"), dwide, N * I);
  } else {
    swiglu_backward(dwide, dhidden, act(l, "mlp_gate"), act(l, "mlp_up"), dhidden, N * I);
  }
  const T* ln2 = whole_rows(act(l, "mlp_norm_output"), sequence_buffer());
  if (gpt2) {
    linear_backward_weight(grad(w.fc_w), gbias(w.fc_b), dwide, ln2, N, C, I, layout, workspace_);
  } else {
    linear_backward_weight(grad(w.gate_w), static_cast<T*>(nullptr), dwide, ln2, N, C, I, layout, workspace_);
    linear_backward_weight(grad(w.up_w), static_cast<T*>(nullptr), dhidden, ln2, N, C, I, layout, workspace_);
  }
  norm_backward(act(l, "mlp_norm_input"), stats(l, "mlp_norm_stats"), w.mlp_norm_w, w.mlp_norm_b, [&](int64_t r0, int64_t rows, T* into) {
    if (gpt2) {
      linear_backward_input(into, dwide + r0 * I, param(w.fc_w), rows, C, I, layout, workspace_);
    } else {
      linear_backward_input(into, dwide + r0 * I, param(w.gate_w), rows, C, I, layout, workspace_);
      linear_backward_input(into, dhidden + r0 * I, param(w.up_w), rows, C, I, layout, workspace_, true);
    }
  });
  // Attention: mid = x + o(attention(qkv(ln1(x)))).
  T* att = act(l, "attention_output");
  T* datt = dnarrow;  // N · q/tp elements: within the buffer's (N or N/tp under sequence parallelism) · max(h, q)
  const QkvViews qkv = qkv_views(act(l, "qkv"));
  const QkvViews dqkv = qkv_views(dwide);
  const T* dmid = gathered_gemms(dres, sequence_gradient_buffer(), [&](int64_t r0, int64_t rows, const T* in) {
    linear_backward_input(datt + r0 * local.q, in, param(w.o_w), rows, local.q, C, layout, workspace_);
  });
  linear_backward_weight(grad(w.o_w), gbias(w.o_b), dmid, att, N, local.q, C, layout, workspace_);
  cp_.attention_backward(dqkv.q, dqkv.k, dqkv.v, datt, qkv.q, qkv.k, qkv.v, att, stats(l, "attention_lse"), qkv.shape, ring_buffers(), workspace_);
  if (!gpt2) {
    const auto rotary = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.rotary_pct);
    rope_rotate(dqkv.q, B_, T_, local.heads, c.head_dim, local.q, rotary, c.rope_theta, true, cp_.split());
    rope_rotate(dqkv.k, B_, T_, local.kv_heads, c.head_dim, local.kv, rotary, c.rope_theta, true, cp_.split());
  }
  const T* ln1 = whole_rows(act(l, "attn_norm_output"), sequence_buffer());
  if (gpt2) {
    linear_backward_weight(grad(w.qkv_w), gbias(w.qkv_b), dwide, ln1, N, C, 3 * local.q, layout, workspace_);
  } else {
    linear_backward_weight(grad(w.q_w), gbias(w.q_b), dqkv.q, ln1, N, C, local.q, layout, workspace_);
    linear_backward_weight(grad(w.k_w), gbias(w.k_b), dqkv.k, ln1, N, C, local.kv, layout, workspace_);
    linear_backward_weight(grad(w.v_w), gbias(w.v_b), dqkv.v, ln1, N, C, local.kv, layout, workspace_);
  }
  norm_backward(act(l, "block_input"), stats(l, "attn_norm_stats"), w.attn_norm_w, w.attn_norm_b, [&](int64_t r0, int64_t rows, T* into) {
    if (gpt2) {
      linear_backward_input(into, dwide + r0 * 3 * local.q, param(w.qkv_w), rows, C, 3 * local.q, layout, workspace_);
    } else {
      linear_backward_input(into, dqkv.q + r0 * local.q, param(w.q_w), rows, C, local.q, layout, workspace_);
      linear_backward_input(into, dqkv.k + r0 * local.kv, param(w.k_w), rows, C, local.kv, layout, workspace_, true);
      linear_backward_input(into, dqkv.v + r0 * local.kv, param(w.v_w), rows, C, local.kv, layout, workspace_, true);
    }
  });
}

// Under sequence parallelism each rank's norm gradients cover its own tokens:
// summed over the group, once per step (Megatron-LM all-reduces the layer-norm
// gradients of sequence-parallel layers after backward).
template <typename T>
void Transformer<T>::reduce_sequence_parallel_gradients() {
  if (!tp_.sequence_parallel()) return;
  for (int index : norm_parameters(layers_, final_norm_w_, final_norm_b_)) tp_.all_reduce(grad(index), grads_[static_cast<size_t>(index)].numel());
}

template class Transformer<float>;
template class Transformer<double>;
template class Transformer<bf16>;
template class Transformer<fp16>;

}  // namespace tessera::engine
