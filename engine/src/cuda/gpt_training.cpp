// One GPU's training step; see cuda/gpt_training.h. The order of the
// operations and the buffers they use follow the CPU model's block_forward,
// head_forward, head_backward and block_backward (model/transformer.cpp), with
// every op replaced by its GPU launcher.
#include "tessera/engine/cuda/gpt_training.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include "tessera/engine/device/device_block.h"
#include "fsdp_shards.h"
#include "gemini_shards.h"
#include "tensor_parallel_step.h"
#include "device_adamw_step.h"
#include "zero_shards.h"
#include "tessera/engine/cuda/activation.h"
#include "tessera/engine/cuda/adamw.h"
#include "tessera/engine/cuda/attention.h"
#include "tessera/engine/cuda/cross_entropy.h"
#include "tessera/engine/cuda/device_memory.h"
#include "tessera/engine/cuda/embedding.h"
#include "tessera/engine/cuda/gemm.h"
#include "tessera/engine/cuda/norms.h"
#include "tessera/engine/cuda/residual.h"
#include "tessera/engine/cuda/ring_attention.h"
#include "tessera/engine/cuda/rope.h"
#include "tessera/engine/cuda/stream_events.h"
#include "tessera/engine/cuda/sum_of_squares.h"
#include "tessera/engine/device/caching_allocator.h"
#include "tessera/engine/device/gpu_plugins.h"
#include "tessera/engine/device/stage_boundaries.h"
#include "tessera/engine/device/step_activations.h"
#include "tessera/engine/device/tensor_parallel_part.h"
#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/model/engine_computes.h"
#include "tessera/engine/model/parameter_slots.h"
#include "tessera/engine/ops/linear.h"
#include "tessera/engine/parallel/ddp_buckets.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/engine/parallel/zero_buckets.h"
#include "tessera/engine/parallel/pipeline_transfers.h"
#include "tessera/planner/activations.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/pipeline_stage_model.h"
#include "tessera/planner/rank_order_reduction.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine::cuda {

namespace {

using T = bf16;

// A failed launch or library call inside a step: the step returns it as its one-line error.
struct StepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw StepError(std::string(what) + ": " + cudaGetErrorString(error));
}
void check(const std::string& error, const char* what) {
  if (!error.empty()) throw StepError(std::string(what) + ": " + error);
}
void check(const Status& status) {
  if (!status.ok()) throw StepError(status.error().message);
}
void check(const Status& status, const char* what) {
  if (!status.ok()) throw StepError(std::string(what) + ": " + status.error().message);
}

}  // namespace

struct GptTraining::State {
  planner::ModelConfig config;  // the widths this rank computes with (tensor parallelism: its part's, tp_rank_widths)
  int64_t B = 0, Tn = 0, N = 0, C = 0, I = 0, V = 0, numel = 0;
  int64_t Nl = 0;  // the rows of an (N, C) tensor outside the split layers: N, or N/tp under sequence parallelism
  ParameterSlots slots;
  std::vector<planner::FlatParameter> order;
  std::vector<bool> decay;
  OptimizerOptions options;
  int64_t steps = 0;
  MemoryLedger* ledger = nullptr;
  // Data parallelism: the ranks' communicator; DDP: the CPU engine's buckets,
  // how many this backward has started; ZeRO: the shards (zero_shards.h).
  comm::Communicator* group = nullptr;
  std::optional<DdpBucketPlan> buckets;
  size_t started_buckets = 0;
  TensorParallelStep tp;  // the tensor-parallel group's sums, vocabulary slice and norm (tensor_parallel_step.h)
  // Pipeline parallelism: the stage this rank runs (the whole model without
  // one), its model chunks' blocks (one chunk but under the interleaved
  // schedule), the stages' communicator, the first and last stage's (a tied
  // embedding's gradient; null elsewhere) and the schedule.
  planner::PipelinePlacement stage;
  std::vector<planner::StageLayers> chunks;
  comm::Communicator* pipeline = nullptr;
  std::unique_ptr<comm::Communicator> embedding;
  int64_t tied_piece_numel = 0;  // the tied sum's pieces: a DDP bucket's elements (planner::ddp_bucket_numel)
  planner::PipelineSchedule schedule = planner::PipelineSchedule::one_f_one_b;
  // Context parallelism: the context group, which chunks of each sequence
  // this rank holds (Tn of its tokens), and one K/V block of its ring (its tp rank's key-value heads).
  comm::Communicator* context = nullptr;
  planner::ContextSplit split;
  int64_t ring_block = 0;

  CudaDeviceMemory memory;
  CudaEvents events;
  std::unique_ptr<CachingAllocator> allocator;  // declared after its sources, destroyed before them
  Gemm gemm;
  std::unique_ptr<Attention> attention;  // its workspace from the allocator: made after it, destroyed before it
  std::unique_ptr<RingAttention> ring;    // cuDNN's attention over the context group's ring (over this rank's tokens alone without one)
  int64_t library_workspace_bytes = 0;  // booked for cuBLASLt's workspace

  DeviceBlock params, grads, master, m, v;  // under ZeRO: the parameters only, padded; `zero` holds the rest
  std::unique_ptr<ZeroShards> zero;  // ZeRO's shards, from the allocator: declared after it, destroyed before it
  std::unique_ptr<GeminiShards> gemini;  // Gemini's chunks (gemini_shards.h), likewise
  std::unique_ptr<FsdpShards> fsdp;      // FSDP's units (fsdp_shards.h), likewise
  std::vector<T*> parameter_of;      // each flat parameter: in the flat buffer, or in its gathered Gemini chunk or FSDP unit
  std::vector<T*> gradient_of;       // each flat parameter's gradient: in the flat buffer, ZeRO-2's bucket, a Gemini gradient chunk or an FSDP unit's
  StepActivations activations;  // what the forward keeps, the recompute's working set, the logits, the tokens
  StageBoundaries boundaries;   // a pipeline stage's send and receive buffers
  DeviceBlock ones, norm_workspace, norm_sum, sum_workspace;

  ~State() {
    if (ledger != nullptr && library_workspace_bytes > 0) ledger->freed(MemoryCategory::workspace, MemorySpace::device, library_workspace_bytes);
  }

  DeviceBlock take(int64_t bytes, MemoryCategory category) { return DeviceBlock(*allocator, bytes, category); }
  T* param(int index) { return parameter_of[static_cast<size_t>(index)]; }
  T* grad(int index) { return gradient_of[static_cast<size_t>(index)]; }
  T* act(int layer, const char* name) { return static_cast<T*>(activations.block(layer, name)); }
  float* stats(int layer, const char* name) { return static_cast<float*>(activations.block(layer, name)); }
  template <typename X = T>
  X* outside(const char* name) { return static_cast<X*>(activations.outside(name)); }
  // Sequence parallelism's whole-sequence (N, C) buffers, one for values and
  // one for gradients, and what it gathers into them (tensor_parallel_step.h).
  bool sequence_parallel() const { return tp.sequence_parallel(); }
  T* gathered() { return outside("sequence_gathered"); }
  T* gathered_grad() { return outside("sequence_gathered_grad"); }
  const T* whole_values(const T* rows) { return tp.whole_rows(rows, sequence_parallel() ? gathered() : nullptr, N, C); }
  const T* whole_gradients(const T* rows) { return tp.whole_rows(rows, sequence_parallel() ? gathered_grad() : nullptr, N, C); }
  // The CPU model's gathered_gemms and reduced_gemms (model/transformer.h):
  // gemms(first_row, rows, input or out) over all N rows around the
  // collective, or under --tp-comm-overlap over one rank's rows at a time as
  // the chunks move (tensor_parallel_step.h).
  template <typename Gemms>
  const T* gathered_gemms(const T* mine, T* buffer, Gemms gemms) {
    if (!tp.overlapped()) {
      const T* whole = tp.whole_rows(mine, sequence_parallel() ? buffer : nullptr, N, C);
      gemms(int64_t{0}, N, whole);
      return whole;
    }
    tp.all_gather_overlapped(mine, buffer, N, C, [&](int64_t chunk) { gemms(chunk * Nl, Nl, buffer + chunk * Nl * C); });
    return buffer;
  }
  template <typename Gemms>
  void reduced_gemms(T* whole, T* mine, Gemms gemms) {
    if (!tp.overlapped()) {
      gemms(int64_t{0}, N, whole);
      tp.reduce_rows(whole, mine, N, C);
      return;
    }
    tp.reduce_scatter_overlapped(whole, outside("sequence_overlap_send"), mine, N, C, [&](int64_t chunk, T* into) { gemms(chunk * Nl, Nl, into); });
  }

  // out (N, OC) = inp (N, IC) · W + bias, W stored (IC, OC) (in_out: GPT-2's
  // Conv1D) or (OC, IC) (out_in: nn.Linear), as ops/linear.h.
  void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int64_t rows, int64_t IC, int64_t OC, cpu::WeightLayout layout) {
    const bool out_in = layout == cpu::WeightLayout::out_in;
    const GemmCall call{false, out_in, rows, OC, IC, IC, out_in ? IC : OC, OC, 1.0f, 0.0f, bias != nullptr ? GemmEpilogue::bias : GemmEpilogue::none};
    check(gemm.run<T>(call, inp, weight, out, bias, nullptr), "linear forward");
  }
  // dinp = dout · Wᵀ (overwritten, or added with `accumulate`); dweight +=
  // the product of inp and dout in W's layout; dbias += the column sums of dout (1 · dout).
  void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int64_t rows, int64_t IC, int64_t OC,
                       cpu::WeightLayout layout, bool accumulate = false) {
    linear_backward_input(dinp, dout, weight, rows, IC, OC, layout, accumulate);
    linear_backward_weight(dweight, dbias, dout, inp, rows, IC, OC, layout);
  }
  // The input gradient alone, on any range of rows (ops/linear.h's linear_backward_input).
  void linear_backward_input(T* dinp, const T* dout, const T* weight, int64_t rows, int64_t IC, int64_t OC, cpu::WeightLayout layout,
                             bool accumulate = false) {
    const bool out_in = layout == cpu::WeightLayout::out_in;
    const float beta = accumulate ? 1.0f : 0.0f;
    check(gemm.run<T>(GemmCall{false, !out_in, rows, IC, OC, OC, out_in ? IC : OC, IC, 1.0f, beta, GemmEpilogue::none}, dout, weight, dinp, nullptr,
                      nullptr),
          "linear backward (input)");
  }
  // The parameter gradients alone, over all `rows`.
  void linear_backward_weight(T* dweight, T* dbias, const T* dout, const T* inp, int64_t rows, int64_t IC, int64_t OC, cpu::WeightLayout layout) {
    const bool out_in = layout == cpu::WeightLayout::out_in;
    if (out_in) {  // dW (OC, IC) += doutᵀ · inp
      check(gemm.run<T>(GemmCall{true, false, OC, IC, rows, OC, IC, IC, 1.0f, 1.0f, GemmEpilogue::none}, dout, inp, dweight, nullptr, nullptr),
            "linear backward (weight)");
    } else {  // dW (IC, OC) += inpᵀ · dout
      check(gemm.run<T>(GemmCall{true, false, IC, OC, rows, IC, OC, OC, 1.0f, 1.0f, GemmEpilogue::none}, inp, dout, dweight, nullptr, nullptr),
            "linear backward (weight)");
    }
    if (dbias != nullptr) {
      check(gemm.run<T>(GemmCall{false, false, 1, OC, rows, rows, OC, OC, 1.0f, 1.0f, GemmEpilogue::none}, ones.as<T>(), dout, dbias, nullptr, nullptr),
            "linear backward (bias)");
    }
  }
  const T* param_or_null(int index) { return index >= 0 ? param(index) : nullptr; }
  T* grad_or_null(int index) { return index >= 0 ? grad(index) : nullptr; }
  // LayerNorm (statistics: mean, then rstd) or RMSNorm (rstd), as the family
  // has, over this rank's Nl rows.
  void norm_forward(T* out, float* statistics, const T* in, int weight, int bias) {
    const auto eps = static_cast<float>(config.norm_eps);
    if (config.norm == planner::NormKind::layer_norm) {
      check(layernorm_forward(out, statistics, statistics + Nl, in, param(weight), param_or_null(bias), Nl, C, eps, nullptr), "layernorm");
    } else {
      check(rmsnorm_forward(out, statistics, in, param(weight), Nl, C, eps, nullptr), "rmsnorm");
    }
  }
  // Adds the norm's input gradient into dinp, its parameters' into their
  // gradients, from `dout`: this rank's rows of the gradient of its output,
  // which the column-parallel layers above it wrote partial and the group has
  // summed (Megatron's f, backward: reduced_gemms, or reduce_rows for the head).
  void norm_backward(T* dinp, const T* dout, const T* in, const float* statistics, int weight, int bias) {
    void* workspace = norm_workspace.as<void>();
    if (config.norm == planner::NormKind::layer_norm) {
      check(layernorm_backward(dinp, grad(weight), grad_or_null(bias), dout, in, param(weight), statistics, statistics + Nl, Nl, C, workspace, nullptr),
            "layernorm backward");
    } else {
      check(rmsnorm_backward(dinp, grad(weight), dout, in, param(weight), statistics, Nl, C, workspace, nullptr), "rmsnorm backward");
    }
  }
  bool gpt2() const { return config.family == planner::ModelFamily::gpt2; }
  // Where q, k and v lie in a block's "qkv" buffer (the CPU model's
  // qkv_views): GPT-2's fused projection writes them side by side in each
  // token's row, Llama's three projections one after another.
  struct QkvViews {
    T *q, *k, *v;
    cpu::AttentionShape shape;
  };
  static cpu::AttentionShape attention_shape(const planner::ModelConfig& c, int64_t B, int64_t Tn) {
    const int64_t q = c.q_width(), kv = c.kv_width();
    const bool rows = c.family == planner::ModelFamily::gpt2;
    return {B, Tn, c.num_heads, c.num_kv_heads, c.head_dim, rows ? 3 * q : q, rows ? 3 * q : kv};
  }
  QkvViews qkv_views(T* qkv) const {
    const int64_t q = config.q_width(), kv = config.kv_width();
    if (gpt2()) return {qkv, qkv + q, qkv + 2 * q, attention_shape(config, B, Tn)};
    return {qkv, qkv + N * q, qkv + N * (q + kv), attention_shape(config, B, Tn)};
  }
  int64_t rotary_dim() const { return static_cast<int64_t>(static_cast<double>(config.head_dim) * config.rotary_pct); }
  void rope(T* x, int64_t heads, int64_t stride, bool inverse) {
    check(rope_rotate(x, B, Tn, heads, config.head_dim, stride, rotary_dim(), config.rope_theta, inverse, nullptr, split), "rope");
  }
  // The ring attention's buffers, the planner's ring_* terms (empty without context parallelism), as the CPU model's ring_buffers.
  RingBuffers<T> ring_buffers() {
    if (split.cp == 1) return {};
    return ring_buffers_from<T>(ring_block, [this](const char* name) { return outside(name); },
                                [this](const char* name) { return outside<float>(name); });
  }
  // Block l's attention core, over its whole sequences under context parallelism.
  void attention_forward(int l, const QkvViews& qkv, const char* what) {
    check(ring->forward(act(l, "attention_output"), stats(l, "attention_lse"), qkv.q, qkv.k, qkv.v, qkv.shape, ring_buffers()), what);
  }

  int64_t data_parallel_size() const { return group != nullptr ? group->size() : 1; }
  // Starts the all-reduce of buckets [started_buckets, complete) once the
  // backward queued on the compute stream has written them: the
  // communicator's stream waits for an event recorded on the compute stream here (comm/nccl.h).
  void start_buckets(size_t complete) {
    for (; started_buckets < complete; ++started_buckets) {
      const DdpBucket& b = buckets->buckets()[started_buckets];
      check(group->start_all_reduce(grads.as<T>() + b.begin, grads.as<T>() + b.begin, static_cast<size_t>(b.end - b.begin), comm::ReduceOp::sum));
    }
  }
  // Whether DDP's buckets start during backward. Not under tensor
  // parallelism: backward's tensor-parallel all-reduces run on the tp
  // communicator, and a bucket's all-reduce running meanwhile on the dp one
  // is two NCCL communicators in flight at once on one GPU, which NCCL does
  // not promise to make progress (NCCL user guide, "Using multiple NCCL
  // communicators concurrently": operations on different communicators at
  // different epochs, submitted in the same order on every rank; CUDA does
  // not guarantee that their kernels run concurrently, so each rank's could
  // wait for the other's: NVIDIA/nccl issue 195, the maintainers' answer).
  // There every bucket starts after backward's last tp all-reduce
  // (finish_reductions) and is finished before the next one (the norm's).
  // hybrid_parallel's ZeRO keeps the same rule by its one bucket
  // (planner::hybrid_zero_buckets): its reduce-scatters, too, all start in
  // finish_reductions, and each is finished before the next call.
  // Nor in a pipeline, whose stage's gradients are complete only after the
  // schedule's last backward (as the CPU trainer reduces them, run_pipeline).
  // Nor under context parallelism, whose ring's send_recvs in backward run on the context group.
  bool buckets_overlap_backward() const { return tp.size() == 1 && pipeline == nullptr && context == nullptr; }
  // Around `layer`'s backward, in every micro-batch's: ZeRO-2's buckets bind
  // the layer's gradients and start a full one's reduction; Gemini gathers the
  // layer's chunks, opens their gradient chunks and reduces those complete;
  // DDP and ZeRO-1 start the buckets or pieces the layer completed, in the
  // step's last backward (`reduce`).
  // FSDP gathers the layer's unit (and prefetches the next), opens its
  // gradient, and after the backward starts its reduce-scatter (fsdp_schedule.h).
  void before_layer_backward(int layer) {
    if (zero) check(zero->before_backward(layer, gradient_of));
    if (gemini) check(gemini->use_layer(layer, true));
    if (fsdp) check(fsdp->before_backward(layer));
  }
  // Before `layer`'s forward: Gemini gathers its chunks and binds its
  // parameters, FSDP its unit (and the next); after a block's forward FSDP may release it.
  void before_layer_forward(int layer) {
    if (gemini) check(gemini->use_layer(layer, false));
    if (fsdp) check(fsdp->before_forward(layer));
  }
  void after_layer_forward(int layer) {
    if (fsdp) check(fsdp->after_forward(layer));
  }
  void after_layer_backward(int layer, bool reduce) {
    if (zero) return check(zero->after_backward(layer, reduce));
    if (gemini) return;  // its moves reduce the gradient chunks
    if (fsdp) return check(fsdp->after_backward(layer));
    if (reduce && group != nullptr && buckets_overlap_backward()) start_buckets(buckets->complete_after(layer));
  }
  // Under sequence parallelism, after the step's last backward (which, under
  // tensor parallelism, started no bucket: buckets_overlap_backward): the
  // norms' gradients, from this rank's tokens only, summed over the
  // tensor-parallel group; finish_reductions then starts every DDP bucket, in
  // the CPU trainer's order (Transformer::reduce_sequence_parallel_gradients,
  // then the gradient reduction). Under hybrid_parallel's ZeRO they are in
  // its full gradient buffer still (its one bucket is reduced after this);
  // tp and Gemini do not meet (gpu_plugins.h).
  void reduce_sequence_parallel_gradients() {
    if (!sequence_parallel()) return;
    for (int index : norm_parameters(slots.blocks, slots.final_norm_w, slots.final_norm_b)) tp.sum(grad(index), order[static_cast<size_t>(index)].numel);
  }
  // The optimizer reads the gradients only after every bucket's sum has arrived (ZeRO: its shard's).
  void finish_reductions() {
    if (zero) return check(zero->reduce());
    if (gemini) return check(gemini->reduce());
    if (fsdp) return check(fsdp->reduce());
    if (group == nullptr) return;
    start_buckets(buckets->buckets().size());  // all of them here under tensor parallelism (buckets_overlap_backward)
    started_buckets = 0;
    check(group->finish_started());
  }

  // After a failed step: reductions it started still own their buffers (the
  // gradients, ZeRO's buckets) on the communicator's stream. They are
  // finished, or the communicator aborted at its timeout (comm/nccl.h),
  // before the step's owner frees those buffers: cudaFree would otherwise wait
  // for NCCL kernels whose peers may never join.
  void finish_started_after_failure() {
    if (group != nullptr && group->started_calls() > 0) (void)group->finish_started();
    started_buckets = 0;
  }

  void allocate_model_states(const planner::Model& whole, const planner::Model& model, uint64_t seed, const planner::PluginOptions* zero_plugin);
  void allocate_gemini(const planner::Model& model, uint64_t seed, const GpuDataParallel& data_parallel);
  void allocate_fsdp(const planner::Model& model, uint64_t seed, const planner::PluginOptions& plugin);
  void block_forward(int l, const T* x, T* out);
  void recompute_block(int l);
  void block_backward(int l);
  bool first_stage() const { return stage.first(); }
  bool last_stage() const { return stage.last(); }
  // Whether chunk `chunk` is the first virtual stage (embeds the tokens) or the last (holds the head and the loss).
  bool embeds(int64_t chunk) const { return first_stage() && chunk == 0; }
  bool has_head(int64_t chunk) const { return last_stage() && chunk + 1 == static_cast<int64_t>(chunks.size()); }
  int64_t boundary_numel() const { return Nl * C; }
  double forward(const int32_t* host_tokens, const int32_t* host_targets, double gradient_scale, const T* input = nullptr, T* output = nullptr,
                 int64_t chunk = 0);
  void backward(bool reduce, const T* output_grad = nullptr, T* input_grad = nullptr, int64_t chunk = 0);
  double run_pipeline(const int32_t* tokens, const int32_t* targets, int64_t micro_batches, double gradient_scale);
  void exchange(const PipelineTransfer& transfer);
  void sum_tied_embedding_gradients();
  double over_stages(double sum_of_squares);
  std::optional<double> optimizer_step();
};

void GptTraining::State::block_forward(int l, const T* x, T* out) {
  const BlockParameters& w = slots.blocks[static_cast<size_t>(l)];
  const int64_t q = config.q_width(), kv = config.kv_width();
  const bool sp = sequence_parallel();
  T* ln1 = act(l, "attn_norm_output");
  norm_forward(ln1, stats(l, "attn_norm_stats"), x, w.attn_norm_w, w.attn_norm_b);
  const QkvViews qkv = qkv_views(act(l, "qkv"));
  T* att = act(l, "attention_output");
  T* mid = act(l, "mlp_norm_input");  // the residual stream after attention
  T* attention_out = sp ? gathered() : mid;  // the row-parallel output before its sum (the gathered ln1 is used up)
  const cpu::WeightLayout layout = gpt2() ? cpu::WeightLayout::in_out : cpu::WeightLayout::out_in;
  // Rows [r0, r0 + rows) of the column-parallel projections, from those rows of the norm's output.
  gathered_gemms(ln1, gathered(), [&](int64_t r0, int64_t rows, const T* in) {
    if (gpt2()) {
      linear_forward(qkv.q + r0 * qkv.shape.q_stride, in, param(w.qkv_w), param_or_null(w.qkv_b), rows, C, 3 * q, layout);
    } else {
      linear_forward(qkv.q + r0 * q, in, param(w.q_w), param_or_null(w.q_b), rows, C, q, layout);
      linear_forward(qkv.k + r0 * kv, in, param(w.k_w), param_or_null(w.k_b), rows, C, kv, layout);
      linear_forward(qkv.v + r0 * kv, in, param(w.v_w), param_or_null(w.v_b), rows, C, kv, layout);
    }
  });
  if (!gpt2()) {
    rope(qkv.q, config.num_heads, q, false);
    rope(qkv.k, config.num_kv_heads, kv, false);
  }
  attention_forward(l, qkv, "attention forward");
  reduced_gemms(attention_out, mid, [&](int64_t r0, int64_t rows, T* into) {  // row-parallel: Megatron's g
    linear_forward(into, att + r0 * q, param(w.o_w), tp.row_parallel_bias(param_or_null(w.o_b)), rows, q, C, layout);
  });
  check(residual_add(mid, x, Nl * C, nullptr), "residual");
  T* ln2 = act(l, "mlp_norm_output");
  norm_forward(ln2, stats(l, "mlp_norm_stats"), mid, w.mlp_norm_w, w.mlp_norm_b);
  T* hidden = act(l, "mlp_activation");
  T* mlp_out = sp ? gathered() : out;  // the gathered ln2 is used up before the down projection writes it
  T* pre = gpt2() ? act(l, "mlp_pre_activation") : nullptr;
  T* gate = gpt2() ? nullptr : act(l, "mlp_gate");
  T* up = gpt2() ? nullptr : act(l, "mlp_up");
  gathered_gemms(ln2, gathered(), [&](int64_t r0, int64_t rows, const T* in) {
    if (gpt2()) {
      linear_forward(pre + r0 * I, in, param(w.fc_w), param_or_null(w.fc_b), rows, C, I, layout);
    } else {
      linear_forward(gate + r0 * I, in, param(w.gate_w), nullptr, rows, C, I, layout);
      linear_forward(up + r0 * I, in, param(w.up_w), nullptr, rows, C, I, layout);
    }
  });
  if (gpt2()) {
    check(gelu_forward(hidden, pre, N * I, nullptr), "gelu");
  } else {
    check(swiglu_forward(hidden, gate, up, N * I, nullptr), "swiglu");
  }
  const int down = gpt2() ? w.proj_w : w.down_w;
  const T* down_bias = gpt2() ? tp.row_parallel_bias(param_or_null(w.proj_b)) : nullptr;
  reduced_gemms(mlp_out, out, [&](int64_t r0, int64_t rows, T* into) { linear_forward(into, hidden + r0 * I, param(down), down_bias, rows, I, C, layout); });
  check(residual_add(out, mid, Nl * C, nullptr), "residual");
}

// `gradient_scale` multiplies the gradient of the micro-batch's mean loss
// (micro_batch_gradient_scale). A pipeline stage's model chunk `chunk` runs
// its blocks from the previous virtual stage's `input` (but on the first,
// which embeds the tokens) and hands their output to `output` (but on the
// last, which computes the loss; 0 elsewhere).
double GptTraining::State::forward(const int32_t* host_tokens, const int32_t* host_targets, double gradient_scale, const T* input, T* output,
                                   int64_t chunk) {
  const planner::StageLayers& layers = chunks[static_cast<size_t>(chunk)];
  const int L = static_cast<int>(config.num_layers), begin = layers.first_layer, end = layers.first_layer + layers.num_layers;
  T* embedded = act(begin, "block_input");
  if (embeds(chunk)) {
    check(cudaMemcpy(outside<int32_t>("tokens"), host_tokens, static_cast<size_t>(N) * sizeof(int32_t), cudaMemcpyHostToDevice), "copying the tokens");
    before_layer_forward(planner::kEmbeddingLayer);
    // Each rank looks up the tokens of its vocabulary rows (the others' are 0):
    // their sum is the embedding (under sequence parallelism this rank's rows of it).
    T* lookups = sequence_parallel() ? gathered() : embedded;
    check(embedding_forward(lookups, outside<int32_t>("tokens"), param(slots.wte), N, C, tp.vocab(), nullptr), "embedding");
    tp.reduce_rows(lookups, embedded, N, C);
    if (slots.wpe >= 0) check(position_embedding_forward(embedded, param(slots.wpe), Nl, Tn, C, tp.first_row(N), nullptr, split), "position embedding");
  } else {
    check(cudaMemcpyAsync(embedded, input, static_cast<size_t>(boundary_numel()) * sizeof(T), cudaMemcpyDeviceToDevice, nullptr), "taking the stage's input");
  }
  T* final_input = has_head(chunk) ? outside("final_norm_input") : output;
  for (int l = begin; l < end; ++l) {
    before_layer_forward(l);
    block_forward(l, act(l, "block_input"), l + 1 < end ? act(l + 1, "block_input") : final_input);
    after_layer_forward(l);
  }
  if (!has_head(chunk)) return 0;
  check(cudaMemcpy(outside<int32_t>("targets"), host_targets, static_cast<size_t>(N) * sizeof(int32_t), cudaMemcpyHostToDevice), "copying the targets");
  // The head: final norm, logits = h · Wᵀ (W (V, C): the embedding where
  // tied) over every token (under sequence parallelism h is gathered first),
  // and the fused loss, which leaves dlogits = (p − onehot) · scale / N in the logits.
  T* h = outside("head_input");
  before_layer_forward(L);
  norm_forward(h, outside<float>("final_norm_stats"), final_input, slots.final_norm_w, slots.final_norm_b);
  linear_forward(outside("logits"), whole_values(h), param(slots.head), nullptr, N, C, V,
                 cpu::WeightLayout::out_in);
  // The mean over the global batch: this micro-batch's N tokens of k · dp · N (the reduced sum is the mean gradient).
  // Under tensor parallelism its per-row maxima and sums (2N fp32) live in a
  // buffer of N · C bf16 (C ≥ 4) dead until the backward writes it:
  // grad_residual, or under sequence parallelism (grad_residual then N/tp rows) the gathered gradient's.
  const float scale = static_cast<float>(gradient_scale / static_cast<double>(N));
  float* row_statistics = reinterpret_cast<float*>(sequence_parallel() ? gathered_grad() : outside("grad_residual"));
  tp.cross_entropy(outside<float>("token_losses"), outside("logits"), outside<int32_t>("targets"), N, V, scale, row_statistics);
  std::vector<float> host(static_cast<size_t>(N));
  check(cudaMemcpy(host.data(), outside<float>("token_losses"), host.size() * sizeof(float), cudaMemcpyDeviceToHost), "copying the losses");
  double mean = 0;
  for (float loss : host) mean += static_cast<double>(loss);
  return mean / static_cast<double>(N);
}

// Rebuilds what block l did not keep, as the CPU model's recompute_block:
// the attention core from the kept q, k and v (selective), or the whole
// block from its kept input (full), whose output goes into grad_narrow,
// dead until the block's backward writes it. The same launches on the same
// inputs as the forward's.
void GptTraining::State::recompute_block(int l) {
  const BlockRerun rerun = activations.layout().rerun;
  if (rerun == BlockRerun::block) {
    block_forward(l, act(l, "block_input"), outside("grad_narrow"));
  } else if (rerun == BlockRerun::attention) {
    attention_forward(l, qkv_views(act(l, "qkv")), "attention recompute");
  }
}

// grad_residual holds the gradient of the block's output; it leaves holding the gradient of its input.
void GptTraining::State::block_backward(int l) {
  const BlockParameters& w = slots.blocks[static_cast<size_t>(l)];
  const int64_t q = config.q_width(), kv = config.kv_width();
  const cpu::WeightLayout layout = gpt2() ? cpu::WeightLayout::in_out : cpu::WeightLayout::out_in;
  const bool sp = sequence_parallel();
  T* dres = outside("grad_residual");
  T* dnarrow = outside("grad_narrow");
  T* dwide = outside("grad_widest");
  // The norms' output gradients, written whole and partial by the column-parallel layers above them.
  T* dnorm_whole = sp ? gathered_grad() : dnarrow;
  // MLP: out = mid + down(act(ln2(mid))); under sequence parallelism the
  // output's gradient and ln2 are gathered whole (ln2 again, as Megatron does).
  // The down projection's input gradient runs row by row as the output
  // gradient's chunks arrive; its weight gradient needs every row.
  T* hidden = act(l, "mlp_activation");
  T* dhidden = gpt2() ? dwide : dwide + N * I;  // SwiGLU: the up projection's half (dgate, dup)
  const int down = gpt2() ? w.proj_w : w.down_w;
  const T* dout = gathered_gemms(dres, gathered_grad(), [&](int64_t r0, int64_t rows, const T* in) {
    linear_backward_input(dhidden + r0 * I, in, param(down), rows, I, C, layout);
  });
  linear_backward_weight(grad(down), gpt2() ? grad_or_null(w.proj_b) : nullptr, dout, hidden, N, I, C, layout);
  if (gpt2()) {
    check(gelu_backward(dwide, act(l, "mlp_pre_activation"), dwide, N * I, nullptr), "gelu backward");
  } else {
    check(swiglu_backward(dwide, dhidden, act(l, "mlp_gate"), act(l, "mlp_up"), dhidden, N * I, nullptr), "swiglu backward");
  }
  const T* ln2 = whole_values(act(l, "mlp_norm_output"));
  if (gpt2()) {
    linear_backward_weight(grad(w.fc_w), grad_or_null(w.fc_b), dwide, ln2, N, C, I, layout);
  } else {
    linear_backward_weight(grad(w.gate_w), nullptr, dwide, ln2, N, C, I, layout);
    linear_backward_weight(grad(w.up_w), nullptr, dhidden, ln2, N, C, I, layout);
  }
  reduced_gemms(dnorm_whole, dnarrow, [&](int64_t r0, int64_t rows, T* into) {
    if (gpt2()) {
      linear_backward_input(into, dwide + r0 * I, param(w.fc_w), rows, C, I, layout);
    } else {
      linear_backward_input(into, dwide + r0 * I, param(w.gate_w), rows, C, I, layout);
      linear_backward_input(into, dhidden + r0 * I, param(w.up_w), rows, C, I, layout, true);
    }
  });
  norm_backward(dres, dnarrow, act(l, "mlp_norm_input"), stats(l, "mlp_norm_stats"), w.mlp_norm_w, w.mlp_norm_b);
  // Attention: mid = x + o(attention(qkv(ln1(x)))). The attention output's
  // gradient (N · q of this rank's heads) fits grad_narrow's N/tp · max(C, q · tp) under sequence parallelism.
  T* att = act(l, "attention_output");
  const QkvViews qkv = qkv_views(act(l, "qkv"));
  const QkvViews dqkv = qkv_views(dwide);
  const T* dmid = gathered_gemms(dres, gathered_grad(), [&](int64_t r0, int64_t rows, const T* in) {
    linear_backward_input(dnarrow + r0 * q, in, param(w.o_w), rows, q, C, layout);
  });
  linear_backward_weight(grad(w.o_w), grad_or_null(w.o_b), dmid, att, N, q, C, layout);
  check(ring->backward(dqkv.q, dqkv.k, dqkv.v, dnarrow, qkv.q, qkv.k, qkv.v, att, stats(l, "attention_lse"), qkv.shape, ring_buffers()), "attention backward");
  if (!gpt2()) {
    rope(dqkv.q, config.num_heads, q, true);
    rope(dqkv.k, config.num_kv_heads, kv, true);
  }
  const T* ln1 = whole_values(act(l, "attn_norm_output"));
  if (gpt2()) {
    linear_backward_weight(grad(w.qkv_w), grad_or_null(w.qkv_b), dwide, ln1, N, C, 3 * q, layout);
  } else {
    linear_backward_weight(grad(w.q_w), grad_or_null(w.q_b), dqkv.q, ln1, N, C, q, layout);
    linear_backward_weight(grad(w.k_w), grad_or_null(w.k_b), dqkv.k, ln1, N, C, kv, layout);
    linear_backward_weight(grad(w.v_w), grad_or_null(w.v_b), dqkv.v, ln1, N, C, kv, layout);
  }
  reduced_gemms(dnorm_whole, dnarrow, [&](int64_t r0, int64_t rows, T* into) {
    if (gpt2()) {
      linear_backward_input(into, dwide + r0 * 3 * q, param(w.qkv_w), rows, C, 3 * q, layout);
    } else {
      linear_backward_input(into, dqkv.q + r0 * q, param(w.q_w), rows, C, q, layout);
      linear_backward_input(into, dqkv.k + r0 * kv, param(w.k_w), rows, C, kv, layout, true);
      linear_backward_input(into, dqkv.v + r0 * kv, param(w.v_w), rows, C, kv, layout, true);
    }
  });
  norm_backward(dres, dnarrow, act(l, "block_input"), stats(l, "attn_norm_stats"), w.attn_norm_w, w.attn_norm_b);
}

// Adds this micro-batch's gradients into the flat buffer; with `reduce` (the
// step's last micro-batch) starts each bucket's all-reduce once its layers are done.
// A pipeline stage's backward of chunk `chunk` starts from the next virtual
// stage's `output_grad` (but on the last, which has the loss) and hands the
// gradient of its input to `input_grad` (but on the first, which ends in the embedding).
void GptTraining::State::backward(bool reduce, const T* output_grad, T* input_grad, int64_t chunk) {
  const planner::StageLayers& layers = chunks[static_cast<size_t>(chunk)];
  const int L = static_cast<int>(config.num_layers), begin = layers.first_layer, end = layers.first_layer + layers.num_layers;
  const bool sp = sequence_parallel();
  T* dres = outside("grad_residual");
  T* dnarrow = outside("grad_narrow");
  if (has_head(chunk)) {
    check(cudaMemsetAsync(dres, 0, static_cast<size_t>(Nl * C) * sizeof(T), nullptr), "zeroing grad_residual");
    // The head: dh = dlogits · W (partial: this rank's vocabulary rows give part
    // of it), dW += dlogitsᵀ · h (h gathered whole again under sequence parallelism), then the final norm.
    before_layer_backward(L);
    T* dh = sp ? gathered_grad() : dnarrow;
    linear_backward(dh, grad(slots.head), nullptr, outside("logits"), whole_values(outside("head_input")), param(slots.head), N,
                    C, V, cpu::WeightLayout::out_in);
    tp.reduce_rows(dh, dnarrow, N, C);
    norm_backward(dres, dnarrow, outside("final_norm_input"), outside<float>("final_norm_stats"), slots.final_norm_w, slots.final_norm_b);
    after_layer_backward(L, reduce);  // the head
  } else {
    check(cudaMemcpyAsync(dres, output_grad, static_cast<size_t>(boundary_numel()) * sizeof(T), cudaMemcpyDeviceToDevice, nullptr),
          "taking the gradient of the stage's output");
  }
  for (int l = end - 1; l >= begin; --l) {
    before_layer_backward(l);
    recompute_block(l);
    block_backward(l);
    after_layer_backward(l, reduce);
  }
  if (!embeds(chunk)) {
    check(cudaMemcpyAsync(input_grad, dres, static_cast<size_t>(boundary_numel()) * sizeof(T), cudaMemcpyDeviceToDevice, nullptr),
          "handing back the gradient of the stage's input");
    return;
  }
  before_layer_backward(planner::kEmbeddingLayer);
  // Every token's gradient, for the lookups of this rank's vocabulary rows.
  const T* dembedded = whole_gradients(dres);
  check(embedding_backward(grad(slots.wte), dembedded, outside<int32_t>("tokens"), N, C, tp.vocab(), nullptr), "embedding backward");
  if (slots.wpe >= 0) check(position_embedding_backward(grad(slots.wpe), dembedded, B, Tn, C, nullptr, split), "position embedding backward");
  after_layer_backward(planner::kEmbeddingLayer, reduce);
}

// One send_recv of the stage's schedule (parallel/pipeline_transfers.h): the
// last pass's output from its send buffer, the next pass's input into its
// receive buffer. NCCL's call waits for the compute stream's queued work
// first and returns when both halves have completed (comm/nccl.h).
void GptTraining::State::exchange(const PipelineTransfer& transfer) {
  const T* send = transfer.send.gradient ? boundaries.send_gradient.as<T>() : boundaries.send_activation.as<T>();
  T* recv = transfer.recv.gradient ? boundaries.recv_gradient.as<T>() : boundaries.recv_activation.as<T>();
  check(pipeline->send_recv(send, transfer.send.peer, recv, transfer.recv.peer, static_cast<size_t>(boundary_numel())));
}

// The stage's passes in the planner's order over the step's micro-batches
// ((k, B, T) tokens and targets each), each forward's activations kept until
// its backward, the calls before each pass that the schedule makes there;
// then a tied embedding's gradient summed between the first and the last
// stage. Returns the mean loss on the last stage, 0 elsewhere.
double GptTraining::State::run_pipeline(const int32_t* tokens, const int32_t* targets, int64_t micro_batches, double gradient_scale) {
  const StageTransfers step = stage_transfers(schedule, stage.pp, stage.stage, micro_batches, stage.chunks);
  size_t made = 0;  // the transfers made so far
  const auto exchange_before = [&](size_t pass) {
    for (; made < step.transfers.size() && step.transfers[made].before_pass == pass; ++made) exchange(step.transfers[made]);
  };
  double loss = 0;
  for (size_t i = 0; i < step.passes.size(); ++i) {
    exchange_before(i);
    const planner::PipelineOp& op = step.passes[i];
    const int64_t first = op.micro_batch * N;
    if (op.pass == planner::PipelinePass::forward) {
      activations.begin_pass(op.chunk, op.micro_batch);
      const double pass_loss = forward(tokens + first, targets + first, gradient_scale, boundaries.recv_activation.as<T>(),
                                       boundaries.send_activation.as<T>(), op.chunk);
      loss = add_micro_batch_loss(loss, pass_loss, micro_batches);
    } else {
      activations.use_pass(op.chunk, op.micro_batch);
      backward(false, boundaries.recv_gradient.as<T>(), boundaries.send_gradient.as<T>(), op.chunk);
      activations.end_pass(op.chunk, op.micro_batch);
    }
  }
  exchange_before(step.passes.size());
  sum_tied_embedding_gradients();
  return loss;
}

// Megatron-LM sums the word embeddings' gradients between the first and the
// last stage after backward (finalize_model_grads.py,
// _allreduce_word_embedding_grads), as the CPU trainer does
// (sum_tied_embedding_gradients), so both copies take the same step.
// Before DDP's buckets or ZeRO-1's reduce-scatters start (finish_reductions):
// each rank of a stage's dp group sums its own micro-batches' copy with its
// peer stage's, and ZeRO's shard then holds the sum over both and over dp.
// In pieces of a DDP bucket, so that its rank-order scratch (comm/nccl.h) is
// never more than the planner books (memory_model.cpp, tied_sum_scratch_bytes).
void GptTraining::State::sum_tied_embedding_gradients() {
  if (embedding == nullptr) return;
  const int index = first_stage() ? slots.wte : slots.head;
  const int64_t numel = order[static_cast<size_t>(index)].numel;
  for (int64_t begin = 0; begin < numel; begin += tied_piece_numel) {
    const auto count = static_cast<size_t>(std::min(tied_piece_numel, numel - begin));
    check(embedding->all_reduce(grad(index) + begin, grad(index) + begin, count, comm::ReduceOp::sum));
  }
}

// The square of the global gradient norm from this stage's: summed over the
// stages (a tied embedding's copy is not counted, planner::counted_in_gradient_norm).
double GptTraining::State::over_stages(double sum_of_squares) {
  if (pipeline == nullptr) return sum_of_squares;
  double* sum = norm_sum.as<double>();
  check(cudaMemcpy(sum, &sum_of_squares, sizeof(double), cudaMemcpyHostToDevice), "copying the sum of squares");
  check(pipeline->all_reduce(sum, sum, 1, comm::ReduceOp::sum));
  check(cudaMemcpy(&sum_of_squares, sum, sizeof(double), cudaMemcpyDeviceToHost), "copying the sum of squares");
  return sum_of_squares;
}

// The CPU optimizer's step (Optimizer::apply): the global norm, clipping to
// max_grad_norm, one AdamW update per parameter with its decay, rounding into
// bf16; under ZeRO the shard's (zero_shards.h).
std::optional<double> GptTraining::State::optimizer_step() {
  if (zero || gemini || fsdp) {
    auto norm = zero     ? zero->step(sum_workspace.as<void>(), norm_sum.as<double>())
                : gemini ? gemini->step(sum_workspace.as<void>(), norm_sum.as<double>())
                         : fsdp->step(sum_workspace.as<void>(), norm_sum.as<double>());
    if (!norm) throw StepError(norm.error().message);
    return norm.value();
  }
  const double sum = over_stages(tp.sum_of_squares(grads.as<T>(), norm_sum.as<double>(), sum_workspace.as<void>()));
  const std::optional<DeviceAdamWStep> begun = begin_adamw_step(sum, steps, options);
  if (!begun) return std::nullopt;
  const AdamWScalars& scalars = begun->scalars;
  for (size_t p = 0; p < order.size(); ++p) {
    const int64_t offset = order[p].offset;
    const float wd = decay[p] ? static_cast<float>(options.weight_decay) : 0.0f;
    check(adamw(params.as<T>() + offset, master.as<float>() + offset, m.as<float>() + offset, v.as<float>() + offset, grads.as<T>() + offset,
                order[p].numel, wd, scalars, nullptr),
          "adamw");
  }
  return begun->norm;
}

// The parameters of this rank's part `model` of `whole` (from the planner's
// initialization, in flat order, as the CPU model's rank of the same tensor-
// parallel group starts from), their gradients and AdamW's fp32 master
// weights and states: whole, or under ZeRO (`zero_plugin`) the parameters
// padded to dp shards and the rest kept by the shards (zero_shards.h).
void GptTraining::State::allocate_model_states(const planner::Model& whole, const planner::Model& model, uint64_t seed,
                                               const planner::PluginOptions* zero_plugin) {
  const int64_t n = numel, padded = zero_plugin != nullptr ? zero_buffers(model, *zero_plugin, group->size()).parameters : n;
  const std::vector<T> host = initial_part_parameters(whole, seed, tp.size(), tp.rank(), padded, stage);
  std::vector<float> weights(static_cast<size_t>(n));
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = widen(host[i]);
  params = take(padded * 2, MemoryCategory::parameters);
  check(cudaMemcpy(params.as<T>(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "copying the parameters");
  if (zero_plugin != nullptr) {
    zero = std::make_unique<ZeroShards>(*allocator, *ledger, *group, model, *zero_plugin, decay, options, params.as<T>(), tp.group(), pipeline);
    check(zero->start_from(weights));
  } else {
    grads = take(n * 2, MemoryCategory::gradients);
    master = take(n * 4, MemoryCategory::master_weights);
    m = take(n * 4, MemoryCategory::optimizer_states);
    v = take(n * 4, MemoryCategory::optimizer_states);
    check(cudaMemcpy(master.as<float>(), weights.data(), weights.size() * sizeof(float), cudaMemcpyHostToDevice), "copying the master weights");
    check(cudaMemset(m.as<void>(), 0, static_cast<size_t>(n) * 4), "zeroing the optimizer states");
    check(cudaMemset(v.as<void>(), 0, static_cast<size_t>(n) * 4), "zeroing the optimizer states");
  }
  T* flat = zero ? zero->full_gradients() : grads.as<T>();  // null: ZeRO-2's bucket binds them layer by layer
  for (const planner::FlatParameter& p : order) {
    parameter_of.push_back(params.as<T>() + p.offset);
    gradient_of.push_back(flat != nullptr ? flat + p.offset : nullptr);
  }
}

// Gemini: no flat buffers; the parameters live in chunk shards, and each
// layer's are bound into its gathered chunks before it runs (gemini_shards.h).
void GptTraining::State::allocate_gemini(const planner::Model& model, uint64_t seed, const GpuDataParallel& data_parallel) {
  const std::vector<T> host = initial_part_parameters(model, seed, 1, 0, numel);
  std::vector<float> weights(host.size());  // rounded to bf16 first, as the flat start
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = widen(host[i]);
  parameter_of.assign(order.size(), nullptr);
  gradient_of.assign(order.size(), nullptr);
  gemini = std::make_unique<GeminiShards>(*allocator, *ledger, group, model, data_parallel.plugin, data_parallel.gemini_parameter_chunks_on_host, decay, options,
                                          parameter_of, gradient_of);
  check(gemini->start_from(weights));
}

// FSDP: no flat buffers; every unit's fp32 shard, from the model's initial
// fp32 values as the CPU engine's FSDP starts, is cast into its gathered unit
// before the unit runs (fsdp_shards.h).
void GptTraining::State::allocate_fsdp(const planner::Model& model, uint64_t seed, const planner::PluginOptions& plugin) {
  parameter_of.assign(order.size(), nullptr);
  gradient_of.assign(order.size(), nullptr);
  fsdp = std::make_unique<FsdpShards>(*allocator, *ledger, group, model, plugin, decay, options, parameter_of, gradient_of);
  check(fsdp->start_from(model, seed));
}

GptTraining::GptTraining(std::unique_ptr<State> state) : state_(std::move(state)) {}
GptTraining::~GptTraining() = default;

Result<std::unique_ptr<GptTraining>> GptTraining::create(const planner::Model& model, MemoryLedger& ledger, int64_t micro_batch, int64_t seq_len,
                                                         uint64_t seed, const OptimizerOptions& options, const GpuDataParallel& data_parallel,
                                                         planner::RecomputeMode recompute, const GpuTensorParallel& tensor_parallel,
                                                         const GpuPipelineParallel& pipeline, int64_t device_memory_bytes,
                                                         const GpuContextParallel& context_parallel) {
  const planner::ModelConfig& c = model.config;
  const int64_t tp = tensor_parallel.group != nullptr ? tensor_parallel.group->size() : 1;
  const int64_t cp = context_parallel.group != nullptr ? context_parallel.group->size() : 1;
  const int64_t dp = data_parallel.group != nullptr ? data_parallel.group->size() : 1;  // dp × cp ranks under context parallelism
  const bool sequence_parallel = tensor_parallel.sequence_parallel && tp > 1;
  const bool comm_overlap = sequence_parallel && tensor_parallel.comm_overlap;
  const int64_t pp = pipeline.group != nullptr ? pipeline.group->size() : 1;
  planner::PluginOptions layout_plugin = data_parallel.plugin;
  layout_plugin.pp_schedule = pipeline.schedule;
  layout_plugin.num_model_chunks = pipeline.chunks;
  if (dp % cp != 0) return make_error(ErrorCode::invalid_argument, "--cp " + std::to_string(cp) + ": the data-parallel group is the dp × cp ranks");
  if (Status s = check_gpu_layout(layout_plugin, planner::ParallelLayout{dp / cp, tp, pp, sequence_parallel, cp}); !s) return s.error();
  if (Status s = planner::check_context_parallel_sequence(seq_len, cp, planner::ActivationProfile::tessera_gpu); !s) return s.error();
  if (cp > 1 && seq_len % (8 * cp) != 0) {  // the second chunk's fp32 log-sum-exps start T/2 floats in: cuDNN takes 16-byte aligned pointers (attention.h)
    return make_error(ErrorCode::invalid_argument, "--seq " + std::to_string(seq_len) + ": under --cp " + std::to_string(cp) +
                                                       " the GPU step needs chunks of a multiple of 4 tokens; use a --seq that is a multiple of 8 × --cp = " +
                                                       std::to_string(8 * cp));
  }
  // This rank's stage (planner/pipeline_stage_model.h; the whole model without a pipeline) and its chunks' blocks.
  const int64_t chunks = pp > 1 ? layout_plugin.model_chunks() : 1;
  const planner::PipelinePlacement stage = pp > 1 ? planner::PipelinePlacement{pp, pipeline.group->rank(), chunks} : planner::PipelinePlacement{};
  if (pp * chunks > c.num_layers) {
    const std::string asked = chunks > 1 ? "--pp " + std::to_string(pp) + " × --model-chunks " + std::to_string(chunks) : "--pp " + std::to_string(pp);
    return make_error(ErrorCode::invalid_argument, asked + ": every " + (chunks > 1 ? "model chunk" : "stage") + " holds at least one of the model's " +
                                                       std::to_string(c.num_layers) + " blocks; use at most that many");
  }
  const std::vector<planner::StageLayers> stage_chunks =
      planner::stage_chunks(static_cast<int>(c.num_layers), static_cast<int>(pp), static_cast<int>(chunks))[static_cast<size_t>(stage.stage)];
  if (!planner::tp_divides_model(c, tp)) {
    return make_error(ErrorCode::unsupported, "--tp " + std::to_string(tp) + ": each tensor-parallel rank holds whole attention and key-value heads and "
                                              "an equal share of the MLP; choose a --tp that divides " + std::to_string(c.num_heads) + ", " +
                                              std::to_string(c.num_kv_heads) + " and " + std::to_string(c.intermediate_size));
  }
  if (Status s = check_gpu_optimizer(options.kind); !s) return s.error();
  if (Status s = check_engine_computes(c, seq_len); !s) return s.error();
  if (recompute == planner::RecomputeMode::op_selective) {
    return make_error(ErrorCode::unsupported, "--recompute op_selective: the GPU training step recomputes none, selective or full");
  }
  if (micro_batch <= 0 || seq_len <= 0) return make_error(ErrorCode::invalid_argument, "micro-batch and sequence length must be positive");
  if (sequence_parallel) {
    if (Status s = check_sequence_split(micro_batch, seq_len / cp, tp, cp); !s) return s.error();
  }
  if (seq_len > c.max_positions) {
    return make_error(ErrorCode::invalid_argument, "--seq " + std::to_string(seq_len) + " exceeds the model's " + std::to_string(c.max_positions) + " positions");
  }
  const planner::ModelConfig widths = tp_rank_widths(c, tp);
  const int64_t Tn = seq_len / cp;  // this rank's tokens of each sequence
  const cpu::AttentionShape shape = State::attention_shape(widths, micro_batch, Tn);
  if (std::string why = Attention::unsupported(shape); !why.empty()) return make_error(ErrorCode::unsupported, "--gpu: " + why);
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    return make_error(ErrorCode::unsupported, std::string("--gpu: no CUDA device: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "none found"));
  }

  auto s = std::make_unique<State>();
  if (!s->gemm.error().empty()) return make_error(ErrorCode::unsupported, "--gpu: " + s->gemm.error());
  // This rank's part of every tensor of its stage (all of it without tensor or pipeline parallelism), by the planner's sharding rule.
  const planner::Model part = planner::tp_rank_model(planner::stage_model(model, stage), tp);
  s->config = widths;
  s->B = micro_batch, s->Tn = Tn, s->N = micro_batch * Tn, s->C = c.hidden_size, s->I = widths.intermediate_size, s->V = widths.vocab_size;
  if (cp > 1) {
    s->context = context_parallel.group;
    s->split = planner::ContextSplit{cp, context_parallel.group->rank()};
  }
  s->options = options;
  s->ledger = &ledger;
  s->tp = TensorParallelStep(tensor_parallel.group, part, sequence_parallel, comm_overlap ? TpCommunication::overlapped : TpCommunication::collectives);
  s->stage = stage;
  s->chunks = stage_chunks;
  s->schedule = pipeline.schedule;
  if (pp > 1) {
    s->pipeline = pipeline.group;
    // Every stage takes part in the split (collective); the middle ones form a group they never use, as on the CPU.
    const bool tied = std::any_of(model.inventory.tensors.begin(), model.inventory.tensors.end(), [](const planner::TensorInfo& t) { return t.tied_to >= 0; });
    if (tied) {
      auto ends = pipeline.group->split(stage.first() || stage.last() ? 0 : 1, pipeline.group->rank(), "embedding");
      if (!ends) return ends.error();
      if (stage.first() || stage.last()) s->embedding = std::move(ends).value();
      s->tied_piece_numel = planner::ddp_bucket_numel(data_parallel.plugin.bucket_bytes, static_cast<int64_t>(sizeof(T)));
    }
  }
  s->Nl = s->tp.local_rows(s->N);
  s->order = planner::flat_parameter_order(part.inventory);
  s->slots = parameter_slots(part.inventory, static_cast<int>(c.num_layers));
  std::vector<std::vector<int64_t>> shapes;
  for (const planner::FlatParameter& flat : s->order) shapes.push_back(part.inventory.tensors[static_cast<size_t>(flat.tensor_index)].shape);
  s->decay = decay_mask(shapes);
  s->numel = part.inventory.parameter_count();
  const planner::PluginOptions& plugin = data_parallel.plugin;
  if (Status supported = check_gpu_plugin(plugin); !supported) return supported.error();
  const bool sharded = data_parallel.group != nullptr && data_parallel.group->size() > 1 && zero_stage_of(plugin) > 0;
  if (sharded && plugin.kind == planner::PluginKind::hybrid_parallel) {  // its one bucket (planner::hybrid_zero_buckets), as the CPU engine's
    if (Status s = check_data_parallel_supported(plugin, planner::Precision::bf16, part, dp); !s) return s.error();
  }
  const bool gemini = plugin.kind == planner::PluginKind::gemini;  // on one GPU too
  const bool fsdp = plugin.kind == planner::PluginKind::torch_fsdp;  // likewise
  if (data_parallel.group != nullptr && data_parallel.group->size() > 1) {
    s->group = data_parallel.group;
    if (!sharded && !gemini && !fsdp) s->buckets.emplace(part.inventory, s->order, s->numel, plugin.bucket_bytes, static_cast<int64_t>(sizeof(T)));
  }
  s->allocator = std::make_unique<CachingAllocator>(s->memory, s->events, ledger, device_memory_bytes);
  s->attention = std::make_unique<Attention>(*s->allocator);
  if (!s->attention->error().empty()) return make_error(ErrorCode::unsupported, "--gpu: " + s->attention->error());
  s->ring = std::make_unique<RingAttention>(*s->attention, s->context, nullptr);
  s->library_workspace_bytes = Gemm::kWorkspaceBytes;
  ledger.allocated(MemoryCategory::workspace, MemorySpace::device, s->library_workspace_bytes);

  try {
    const int64_t n = s->numel, N = s->N, C = s->C;
    if (gemini) {
      s->allocate_gemini(model, seed, data_parallel);  // tensor parallelism is hybrid_parallel's: `part` is `model` here
    } else if (fsdp) {
      s->allocate_fsdp(model, seed, plugin);  // likewise
    } else {
      s->allocate_model_states(model, part, seed, sharded ? &plugin : nullptr);
    }

    // What the forward keeps and the recompute rebuilds, sized and named by
    // the planner's `tessera_gpu` table by the CPU model's rule (model/activation_buffers.h).
    const planner::ActivationTable table = planner::activation_table(c, planner::ActivationProfile::tessera_gpu, planner::Precision::bf16);
    const planner::ActivationShape shape{micro_batch, Tn, tp, sequence_parallel, cp, comm_overlap};
    const ActivationBuffers buffers = activation_buffers(table, shape, recompute);
    s->ring_block = ring_kv_block(shape, c.kv_width());
    if (pp > 1) {
      s->activations = StepActivations(*s->allocator, buffers, c.num_layers, stage_chunks, stage.first(), stage.last());
      s->boundaries = StageBoundaries(*s->allocator, s->boundary_numel() * static_cast<int64_t>(sizeof(T)), stage.first(), stage.last(), chunks);
    } else {
      s->activations = StepActivations(*s->allocator, buffers, c.num_layers);
    }
    // Workspaces: a column of ones for the bias gradients (1 · dout), the
    // norms' partial sums, the gradient norm's partial sums and its result
    // (a double and the overflow flag).
    s->ones = s->take(N * 2, MemoryCategory::workspace);
    const std::vector<T> ones(static_cast<size_t>(N), narrow<T>(1.0f));
    check(cudaMemcpy(s->ones.as<T>(), ones.data(), ones.size() * sizeof(T), cudaMemcpyHostToDevice), "copying the ones");
    s->norm_workspace = s->take(static_cast<int64_t>(norm_backward_workspace_bytes(N, C)), MemoryCategory::workspace);
    // Gemini sums a shard at a time, FSDP its shard.
    const int64_t summed = s->gemini ? std::max(n, s->gemini->layout().shard_numel) : s->fsdp ? std::max(n, s->fsdp->shard_numel()) : n;
    s->sum_workspace = s->take(static_cast<int64_t>(sum_of_squares_workspace_bytes(summed)), MemoryCategory::workspace);
    s->norm_sum = s->take(16, MemoryCategory::workspace);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::unsupported, std::string("--gpu: ") + e.what());
  }
  return std::unique_ptr<GptTraining>(new GptTraining(std::move(s)));
}

Result<GpuStepResult> GptTraining::step(const int32_t* tokens, const int32_t* targets, int64_t micro_batches) {
  State& s = *state_;
  if (micro_batches < 1) return make_error(ErrorCode::invalid_argument, "--micro-batches must be a positive integer");
  if (s.stage.chunks > 1 && micro_batches % s.stage.pp != 0) {  // as the CPU engine's check_pipeline
    return make_error(ErrorCode::invalid_argument, "--micro-batches " + std::to_string(micro_batches) +
                                                       ": the interleaved schedule runs the micro-batches in groups of pp; use a multiple of " +
                                                       std::to_string(s.stage.pp));
  }
  // Each offloaded gradient shard is copied over the host's, not added
  // (FSDP1's CPUOffload cannot accumulate: planner::check_fsdp_offload_accumulation).
  if (s.fsdp && s.fsdp->offloaded() && micro_batches > 1) {
    return make_error(ErrorCode::invalid_argument, "--micro-batches " + std::to_string(micro_batches) +
                                                       ": torch_fsdp with --cpu-offload keeps one micro-batch's gradient; use --micro-batches 1");
  }
  try {
    if (s.zero) {
      check(s.zero->zero_gradients());
    } else if (s.gemini) {
      check(s.gemini->zero_gradients());
    } else if (s.fsdp) {
      check(s.fsdp->zero_gradients());
    } else {
      check(cudaMemsetAsync(s.grads.as<void>(), 0, static_cast<size_t>(s.numel) * sizeof(T), nullptr), "zeroing the gradients");
    }
    GpuStepResult result;
    const double scale = micro_batch_gradient_scale(1.0, micro_batches, s.data_parallel_size());
    if (s.pipeline != nullptr) result.loss = s.run_pipeline(tokens, targets, micro_batches, scale);
    for (int64_t micro = 0; micro < micro_batches && s.pipeline == nullptr; ++micro) {
      const int64_t first = micro * s.N;
      result.loss = add_micro_batch_loss(result.loss, s.forward(tokens + first, targets + first, scale), micro_batches);
      s.backward(reduces_in_backward(micro, micro_batches));
    }
    s.reduce_sequence_parallel_gradients();
    s.finish_reductions();
    const std::optional<double> norm = s.optimizer_step();
    result.updated = norm.has_value();
    result.grad_norm = norm.value_or(NAN);
    check(cudaDeviceSynchronize(), "the step");
    return result;
  } catch (const std::exception& e) {
    s.finish_started_after_failure();
    return make_error(ErrorCode::unsupported, std::string("GPU step: ") + e.what());
  }
}

bool GptTraining::sharded() const {
  return state_->zero != nullptr || ((state_->gemini != nullptr || state_->fsdp != nullptr) && state_->group != nullptr);
}

FlatAdamWState GptTraining::host_state(const planner::Model& model) const {
  if (state_->zero) return FlatAdamWState(state_->zero->layout());
  if (state_->fsdp && sharded()) return FlatAdamWState(state_->fsdp->layout());
  return state_->gemini && sharded() ? FlatAdamWState(state_->gemini->layout()) : FlatAdamWState(model);
}

Status GptTraining::save_state(FlatAdamWState& state) const {
  const State& s = *state_;
  if (s.zero) {
    if (Status saved = s.zero->save(state); !saved) return make_error(ErrorCode::io_error, "GPU checkpoint: " + saved.error().message);
    return Status::success();
  }
  if (s.gemini) {
    if (Status saved = s.gemini->save(state); !saved) return make_error(ErrorCode::io_error, "GPU checkpoint: " + saved.error().message);
    return Status::success();
  }
  if (s.fsdp) {
    if (Status saved = s.fsdp->save(state); !saved) return make_error(ErrorCode::io_error, "GPU checkpoint: " + saved.error().message);
    return Status::success();
  }
  const auto bytes = static_cast<size_t>(s.numel) * sizeof(float);
  try {
    check(cudaMemcpy(state.weights(), s.master.as<float>(), bytes, cudaMemcpyDeviceToHost), "copying the master weights");
    check(cudaMemcpy(state.state(0), s.m.as<float>(), bytes, cudaMemcpyDeviceToHost), "copying AdamW's exp_avg");
    check(cudaMemcpy(state.state(1), s.v.as<float>(), bytes, cudaMemcpyDeviceToHost), "copying AdamW's exp_avg_sq");
  } catch (const std::exception& e) {
    return make_error(ErrorCode::io_error, std::string("GPU checkpoint: ") + e.what());
  }
  state.set_steps_taken(s.steps);
  return Status::success();
}

Status GptTraining::restore_state(FlatAdamWState& state) {
  State& s = *state_;
  if (s.zero) {
    if (Status restored = s.zero->restore(state); !restored) return make_error(ErrorCode::io_error, "GPU checkpoint: " + restored.error().message);
    return Status::success();
  }
  if (s.gemini) {
    if (Status restored = s.gemini->restore(state); !restored) return make_error(ErrorCode::io_error, "GPU checkpoint: " + restored.error().message);
    return Status::success();
  }
  if (s.fsdp) {
    if (Status restored = s.fsdp->restore(state); !restored) return make_error(ErrorCode::io_error, "GPU checkpoint: " + restored.error().message);
    return Status::success();
  }
  const auto bytes = static_cast<size_t>(s.numel) * sizeof(float);
  std::vector<T> rounded(static_cast<size_t>(s.numel));
  for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = narrow<T>(state.weights()[i]);
  try {
    check(cudaMemcpy(s.master.as<float>(), state.weights(), bytes, cudaMemcpyHostToDevice), "copying the master weights");
    check(cudaMemcpy(s.m.as<float>(), state.state(0), bytes, cudaMemcpyHostToDevice), "copying AdamW's exp_avg");
    check(cudaMemcpy(s.v.as<float>(), state.state(1), bytes, cudaMemcpyHostToDevice), "copying AdamW's exp_avg_sq");
    check(cudaMemcpy(s.params.as<T>(), rounded.data(), rounded.size() * sizeof(T), cudaMemcpyHostToDevice), "copying the parameters");
  } catch (const std::exception& e) {
    return make_error(ErrorCode::io_error, std::string("GPU checkpoint: ") + e.what());
  }
  s.steps = state.steps_taken();
  return Status::success();
}

std::vector<bf16> GptTraining::parameters() const {
  std::vector<bf16> host(static_cast<size_t>(state_->numel)), gradients;
  if (state_->gemini) {
    check(state_->gemini->copy_shards(host, gradients));
    return host;
  }
  if (state_->fsdp) {
    check(state_->fsdp->copy_shards(host, gradients));
    return host;
  }
  check(cudaMemcpy(host.data(), state_->params.as<T>(), host.size() * sizeof(T), cudaMemcpyDeviceToHost), "copying the parameters");
  return host;
}

std::vector<bf16> GptTraining::gradients() const {
  std::vector<bf16> host(static_cast<size_t>(state_->numel));
  if (state_->zero) {
    check(state_->zero->copy_gradient_shard(host));
    return host;
  }
  if (state_->gemini || state_->fsdp) {
    std::vector<bf16> weights;
    check(state_->gemini ? state_->gemini->copy_shards(weights, host) : state_->fsdp->copy_shards(weights, host));
    return host;
  }
  check(cudaMemcpy(host.data(), state_->grads.as<T>(), host.size() * sizeof(T), cudaMemcpyDeviceToHost), "copying the gradients");
  return host;
}

}  // namespace tessera::engine::cuda
