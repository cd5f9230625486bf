#include "tessera/planner/activations.h"
#include "tessera/planner/tp_overlap_schedule.h"

#include "activation_terms.h"
#include "activations_hf.h"
#include "activations_torchtitan.h"

#include "tessera/planner/eager_elementwise.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/op_checkpoint_policy.h"

#include <algorithm>

namespace tessera::planner {
namespace {

using Split = ActivationSplit;
constexpr int64_t kMaskBytes = 1;  // Megatron keeps dropout masks as uint8 / bool

// Korthikanti et al. 2022 §4.1, term by term, with the family's widths.
ActivationTable megatron_table(const ModelConfig& c, int64_t dt) {
  const int64_t h = c.hidden_size;
  const int64_t I = c.intermediate_size;
  const bool attn_dropout = c.attention_dropout > 0;
  const bool hidden_dropout = c.hidden_dropout > 0;
  ActivationTable t;
  auto& b = t.block;
  // Attention block: 11sbh + 5as²b with dropout (§4.1, "Attention block").
  ActivationTerm input = term("attn_norm_input", h, dt, Split::sequence);  // layer-norm input, 2sbh
  input.is_block_input = true;
  b.push_back(input);
  b.push_back(term("qkv_input", h, dt, Split::sequence));                                // 2sbh
  b.push_back(term("query", c.q_width(), dt, Split::tensor_parallel));  // with key, 4sbh for MHA
  b.push_back(term("key", c.kv_width(), dt, Split::tensor_parallel));
  b.push_back(term("value", c.kv_width(), dt, Split::tensor_parallel));  // 2sbh for MHA
  ActivationTerm softmax{"softmax_output", c.num_heads, dt, true, Split::tensor_parallel, false, false};  // 2as²b
  b.push_back(softmax);
  if (attn_dropout) {
    b.push_back(ActivationTerm{"softmax_dropout_mask", c.num_heads, kMaskBytes, true, Split::tensor_parallel, false, false});  // as²b
    b.push_back(ActivationTerm{"softmax_dropout_output", c.num_heads, dt, true, Split::tensor_parallel, false, false});      // 2as²b
  }
  b.push_back(term("attn_proj_input", c.q_width(), dt, Split::tensor_parallel));  // 2sbh
  if (hidden_dropout) b.push_back(term("attn_dropout_mask", h, kMaskBytes, Split::sequence));  // sbh
  // MLP block: 19sbh with a 4h GELU MLP (§4.1, "MLP").
  if (!c.parallel_residual) b.push_back(term("mlp_norm_input", h, dt, Split::sequence));  // 2sbh; a parallel residual reuses attn_norm_input
  b.push_back(term("mlp_input", h, dt, Split::sequence));  // 2sbh
  if (c.mlp == MlpKind::swiglu) {
    b.push_back(term("mlp_gate", I, dt, Split::tensor_parallel));  // SwiGLU's inputs: the gate's and the up projection's outputs
    b.push_back(term("mlp_up", I, dt, Split::tensor_parallel));
  } else {
    b.push_back(term("activation_input", I, dt, Split::tensor_parallel));  // 8sbh for I = 4h
  }
  b.push_back(term("activation_output", I, dt, Split::tensor_parallel));  // 8sbh for I = 4h
  if (hidden_dropout) b.push_back(term("mlp_dropout_mask", h, kMaskBytes, Split::sequence));  // sbh
  // Outside the blocks (§4.3): the embedding dropout mask on the first stage,
  // the final norm and head inputs (4sbh) and the fp32 logits (4sbv) on the last.
  if (c.embedding_dropout > 0) t.first_stage.push_back(term("embedding_dropout_mask", h, kMaskBytes, Split::sequence));
  t.last_stage.push_back(term("final_norm_input", h, dt, Split::sequence));
  t.last_stage.push_back(term("head_input", c.word_embed_proj_dim, dt, Split::sequence));
  t.logits.push_back(term("logits_fp32", c.vocab_size, kFp32, Split::tensor_parallel));
  return t;
}

// A fused attention kernel's saved tensors in place of Korthikanti's attention
// core. The kernel keeps q, k, v, its output and a per-row log-sum-exp, and
// draws its dropout mask again in backward from a saved Philox seed and offset
// (16 bytes per layer, not counted), so no s×s tensor outlives the forward:
//  - Dao-AILab/flash-attention@005300258a22e5fc6be621063c3d5704e82b89d9,
//    flash_attn/flash_attn_interface.py, FlashAttnFunc.forward:
//    save_for_backward(q, k, v, out_padded, softmax_lse, rng_state);
//  - Dao-AILab/flash-attention@00979f57acf503b0b080ff08ada0007080074649,
//    csrc/flash_attn/flash_api.cpp, mha_fwd: softmax_lse is
//    (batch, num_heads, seqlen_q) in fp32, whatever the inputs' dtype;
//  - pytorch/pytorch@007ae17eabceb8ec8aca74d0ad269d06ccdfeb52,
//    aten/src/ATen/native/transformers/cuda/attention.cu,
//    _scaled_dot_product_flash_attention_cuda: SDPA's flash backend returns the
//    output and log_sumexp of the same kernel for its backward; the output is
//    written (b, s, heads, d) and handed back transposed, so the model's
//    transpose back and reshape are views and the output projection saves that
//    same tensor (Korthikanti's attn_proj_input, counted once).
// q, k and v are Korthikanti's query, key and value terms. Under selective
// recompute the attention core is checkpointed and re-run, so only its inputs
// stay and the log-sum-exp goes (NVIDIA/Megatron-LM@00c2c0adeec16015f386548793c88ef08ff6acec,
// megatron/core/transformer/attention.py: checkpoint_core_attention when
// recompute_granularity is 'selective', _checkpointed_attention_forward).
ActivationTable flash_table(const ModelConfig& c, int64_t dt) {
  ActivationTable t = megatron_table(c, dt);
  std::vector<ActivationTerm>& b = t.block;
  std::erase_if(b, [](const ActivationTerm& term) { return term.per_key_position; });
  const auto value = std::find_if(b.begin(), b.end(), [](const ActivationTerm& term) { return term.name == "value"; });
  b.insert(value + 1, log_sum_exp("softmax_lse", c));
  if (is_torchtitan_llama_block(c)) mark_op_policy(b, c, dt);
  return t;
}

// What Tessera's engine keeps (engine/src/model): no dropout, FlashAttention-2's
// attention (engine/include/tessera/engine/ops/attention.h) keeping its output
// and an fp32 log-sum-exp per query row and head, norm statistics in fp32.
// Selective recompute re-runs the attention core from the kept q, k and v, as
// Megatron's checkpoint_core_attention does (see flash_table), dropping the
// log-sum-exp.
ActivationTable tessera_table(const ModelConfig& c, int64_t dt) {
  const int64_t h = c.hidden_size;
  const int64_t I = c.intermediate_size;
  const int64_t stats = c.norm == NormKind::layer_norm ? 2 : 1;  // mean and rstd, or rstd alone
  ActivationTable t;
  auto& b = t.block;
  ActivationTerm input = term("block_input", h, dt, Split::sequence);
  input.is_block_input = true;
  b.push_back(input);
  b.push_back(term("attn_norm_stats", stats, kFp32, Split::sequence));
  b.push_back(term("attn_norm_output", h, dt, Split::sequence));
  b.push_back(term("qkv", c.q_width() + 2 * c.kv_width(), dt, Split::tensor_parallel));
  b.push_back(log_sum_exp("attention_lse", c));
  b.push_back(term("attention_output", c.q_width(), dt, Split::tensor_parallel));
  if (!c.parallel_residual) b.push_back(term("mlp_norm_input", h, dt, Split::sequence));
  b.push_back(term("mlp_norm_stats", stats, kFp32, Split::sequence));
  b.push_back(term("mlp_norm_output", h, dt, Split::sequence));
  if (c.mlp == MlpKind::swiglu) {
    b.push_back(term("mlp_gate", I, dt, Split::tensor_parallel));
    b.push_back(term("mlp_up", I, dt, Split::tensor_parallel));
  } else {
    b.push_back(term("mlp_pre_activation", I, dt, Split::tensor_parallel));
  }
  b.push_back(term("mlp_activation", I, dt, Split::tensor_parallel));
  t.last_stage.push_back(term("final_norm_input", h, dt, Split::sequence));
  t.last_stage.push_back(term("final_norm_stats", stats, kFp32, Split::sequence));
  t.last_stage.push_back(term("head_input", c.word_embed_proj_dim, dt, Split::sequence));
  // The head writes fp32 logits; the loss overwrites them in place with dlogits.
  t.logits.push_back(term("logits_fp32", c.vocab_size, kFp32, Split::tensor_parallel));
  t.logits.push_back(term("token_losses", 1, kFp32, Split::whole));  // the head sees every token, sequence parallel or not
  // Backward keeps the residual-stream gradient, one hidden-wide gradient (of a
  // norm output or the attention output) and one of the block's widest
  // intermediate (q, k, v together, or the MLP's hidden layer; SwiGLU's gate and up).
  const int64_t mlp_width = (c.mlp == MlpKind::swiglu ? 2 : 1) * I;
  t.backward_scratch.push_back(term("grad_residual", h, dt, Split::sequence));
  t.backward_scratch.push_back(term("grad_narrow", std::max(h, c.q_width()), dt, Split::sequence));
  t.backward_scratch.push_back(term("grad_widest", std::max(c.q_width() + 2 * c.kv_width(), mlp_width), dt, Split::tensor_parallel));
  // Sequence parallelism (Korthikanti et al. 2022 §4.2.2): a norm's output is
  // kept for this rank's tokens and all-gathered whole before the column-
  // parallel layers, in forward and again in backward (the weight gradients
  // need every token), and a row-parallel layer's partial output or input
  // gradient is reduce-scattered from a whole-sequence buffer: one buffer
  // for values, one for gradients.
  t.backward_scratch.push_back(term("sequence_gathered", h, dt, Split::gathered));
  t.backward_scratch.push_back(term("sequence_gathered_grad", h, dt, Split::gathered));
  // --tp-comm-overlap's reduce-scatters receive the other ranks' partial rows
  // into those whole-sequence buffers and send this rank's from these
  // (planner/tp_overlap_schedule.h).
  t.backward_scratch.push_back(term("sequence_overlap_send", h, dt, Split::overlap_send));
  // Context parallelism's ring attention (engine/include/tessera/engine/model/ring_attention.h):
  // two key-value blocks, the one at hand and the one arriving from the
  // previous rank, and in backward two blocks of their gradients travelling
  // with them; one block's output (forward) or query gradient (backward)
  // before it is merged, with its log-sum-exp; in 16-bit storage the running
  // output in fp32 (engine/src/model/ring_attention.cpp), rounded once after
  // the last block rather than at every merge.
  t.backward_scratch.push_back(term("ring_kv", 4 * c.kv_width(), dt, Split::ring));
  t.backward_scratch.push_back(term("ring_kv_grad", 4 * c.kv_width(), dt, Split::ring));
  t.backward_scratch.push_back(term("ring_partial", c.q_width(), dt, Split::ring));
  t.backward_scratch.push_back(term("ring_partial_lse", c.num_heads, kFp32, Split::ring));
  if (dt < kFp32) t.backward_scratch.push_back(term("ring_merged_output", c.q_width(), kFp32, Split::ring));
  t.counts_recompute_working_set = true;
  return t;
}

// What the engine's GPU step keeps (engine/include/tessera/engine/cuda/gpt_training.h):
// the tessera table, except that its fused softmax + cross-entropy
// (engine/include/tessera/engine/kernels/cross_entropy.h) holds the head's
// 16-bit logits and overwrites them with their gradient, never an fp32 copy,
// and that it copies each micro-batch's int32 tokens (read by the embedding)
// and targets (read by the loss) to the device.
ActivationTable tessera_gpu_table(const ModelConfig& c, int64_t dt) {
  ActivationTable t = tessera_table(c, dt);
  for (ActivationTerm& logits : t.logits) {
    if (logits.name == "logits_fp32") logits = term("logits", c.vocab_size, dt, Split::tensor_parallel);
  }
  t.first_stage.push_back(term("tokens", 1, 4, Split::whole));
  t.last_stage.push_back(term("targets", 1, 4, Split::whole));
  return t;
}

// Transformer Engine keeps each GEMM's input as its FP8 cast (fp8.h).
ActivationTable with_fp8_gemm_inputs(ActivationTable table, Precision precision) {
  if (!is_fp8(precision)) return table;
  for (ActivationTerm& term : table.block) {
    if (saved_in_fp8(term.name)) term.bytes_per_element = 1;
  }
  return table;
}

}  // namespace

ActivationTerm log_sum_exp(std::string_view name, const ModelConfig& c) {
  ActivationTerm lse = term(name, c.num_heads, kFp32, Split::tensor_parallel);
  lse.kept_under_selective = false;
  return lse;
}

void mark_op_policy(std::vector<ActivationTerm>& block, const ModelConfig& c, int64_t dt) {
  for (ActivationTerm& term : block) {
    term.kept_under_op_selective = term.is_block_input || term.name == "softmax_lse" || term.name == "attn_proj_input";
  }
  for (const OpPolicyLinear& linear : op_policy_linears(c)) {
    if (!linear.saved) continue;
    const auto found = std::find_if(block.begin(), block.end(), [&](const ActivationTerm& t) { return t.name == linear.output_term; });
    if (found != block.end()) {
      found->kept_under_op_selective = true;
      continue;
    }
    // The row-parallel output: whole on every tp rank, or its tokens' share under sequence parallelism.
    ActivationTerm output = term(linear.output_term, linear.out_features, dt, Split::sequence);
    output.kept_under_op_selective = true;
    output.kept_under_selective = false;
    output.saved_only_by_op_policy = true;
    block.push_back(output);
  }
}

// Megatron-Core's loss (NVIDIA/Megatron-LM@6e091e1b68c6856c9eeea3069cc167061c0acb64,
// megatron/core/tensor_parallel/cross_entropy.py): _VocabParallelCrossEntropy.forward
// casts the output layer's logits to fp32 (calculate_logits_max) and turns that copy
// into the softmax in place, which backward overwrites with the gradient; the 16-bit
// logits stay referenced by GPTModel._postprocess (megatron/core/models/gpt/gpt_model.py)
// until the loss returns, and backward casts the fp32 gradient back to their dtype, so
// at either end of the loss both are live: the fp32 term plus the 16-bit logits (under
// fp32, .float() returns the logits themselves).
//
// torchtitan's loss (pytorch/torchtitan v0.2.2, components/loss.py cross_entropy_loss;
// 9dec370's train.py loss_fn, the same call): F.cross_entropy(pred.flatten(0, 1).float(), ...),
// eager unless the loss is compiled. The model returns 16-bit logits (FSDP2's
// param_dtype), which train.py deletes before backward (`del pred`), and the
// .float() copy goes once log_softmax has written its fp32 output (kept for
// backward). Forward holds the 16-bit logits, the copy and that output at once;
// backward's start holds three fp32 tensors, the larger peak: log_softmax's
// output, nll_loss's dense gradient and log_softmax's input gradient, the peak
// our H100 probe measured for these ops under Hugging Face's loss
// (activations_hf.cpp). In fp32 the copy is the logits themselves; backward
// still holds the three.
ActivationTable with_loss(ActivationTable table, LossAccounting loss, Precision precision) {
  if (loss == LossAccounting::profile) return table;
  const int64_t vocab = table.logits.front().elements_per_token;
  if (loss == LossAccounting::torchtitan_eager) {
    table.logits = {term("log_softmax_output", vocab, kFp32, Split::tensor_parallel), term("nll_loss_gradient", vocab, kFp32, Split::tensor_parallel),
                    term("log_softmax_gradient", vocab, kFp32, Split::tensor_parallel)};
    return table;
  }
  if (precision != Precision::fp32) table.logits.push_back(term("logits_16bit", vocab, compute_bytes(precision), Split::tensor_parallel));
  return table;
}

LossAccounting loss_accounting(const PluginOptions& plugin, const TrainingOptions& training) {
  if (training.activation_profile != ActivationProfile::flash) return LossAccounting::profile;
  if (plugin.runtime == Runtime::megatron) return LossAccounting::megatron_core;
  const bool eager_loss = !training.torch_compile || plugin.compile_model_only;
  if (plugin.runtime == Runtime::torchtitan && eager_loss) return LossAccounting::torchtitan_eager;
  return LossAccounting::profile;
}

ActivationTable request_activation_table(const ModelConfig& config, const PluginOptions& plugin, const TrainingOptions& training) {
  const ActivationTable table = activation_table(config, training.activation_profile, training.precision, training.transformers_version,
                                                 block_accounting(config, plugin, training));
  return with_loss(table, loss_accounting(plugin, training), training.precision);
}

BlockAccounting block_accounting(const ModelConfig& config, const PluginOptions& plugin, const TrainingOptions& training) {
  if (training.activation_profile != ActivationProfile::flash) return BlockAccounting::profile;
  if (elementwise_execution(config, plugin.runtime, training) != ElementwiseExecution::torchtitan_llama_eager) return BlockAccounting::profile;
  return plugin.fused_rmsnorm ? BlockAccounting::torchtitan_eager_fused_rmsnorm : BlockAccounting::torchtitan_eager;
}

ActivationTable activation_table(const ModelConfig& config, ActivationProfile profile, Precision precision, TransformersVersion transformers,
                                 BlockAccounting block) {
  const int64_t dt = compute_bytes(precision);
  if (profile == ActivationProfile::flash && block != BlockAccounting::profile) {
    return torchtitan_eager_table(config, dt, block == BlockAccounting::torchtitan_eager_fused_rmsnorm);
  }
  switch (profile) {
    case ActivationProfile::megatron: return with_fp8_gemm_inputs(megatron_table(config, dt), precision);
    case ActivationProfile::flash: return with_fp8_gemm_inputs(flash_table(config, dt), precision);
    case ActivationProfile::tessera: return tessera_table(config, dt);
    case ActivationProfile::tessera_gpu: return tessera_gpu_table(config, dt);
    case ActivationProfile::hf: return hf_table(config, dt, HfRun::sdpa, transformers);
    case ActivationProfile::hf_eager: return hf_table(config, dt, HfRun::eager_attention, transformers);
    case ActivationProfile::hf_autocast: return hf_table(config, dt, HfRun::autocast, transformers);
  }
  return tessera_table(config, dt);
}

// A tensor-parallel term keeps each token's share of the heads, features or
// (padded) vocabulary rows on each rank, ⌈width / tp⌉ (tensor_parallel.h pads
// the vocabulary up to a multiple of tp); under sequence parallelism a
// sequence term keeps ⌈tokens / tp⌉ tokens and a gathered one all of them
// (it is absent otherwise); a ring term, present only under context
// parallelism, divides as a tensor-parallel one; an overlap_send term, present
// only under --tp-comm-overlap, holds tp_overlap_send_buffers chunks of
// ⌈tokens / tp⌉ tokens; a whole term is never divided.
int64_t term_bytes(const ActivationTerm& term, const ActivationShape& shape) {
  int64_t per_token = term.elements_per_token * (term.per_key_position ? shape.seq_len : 1);
  int64_t tokens = term.per_micro_batch ? 1 : term.per_position ? shape.seq_len : shape.micro_batch_size * shape.seq_len;
  if (term.split == ActivationSplit::gathered && !shape.sequence_parallel) return 0;
  if (term.split == ActivationSplit::ring && shape.cp == 1) return 0;
  if (term.split == ActivationSplit::overlap_send && !(shape.tp_comm_overlap && shape.sequence_parallel && shape.tp > 1)) return 0;
  if (term.split == ActivationSplit::tensor_parallel || term.split == ActivationSplit::ring) {
    per_token = (per_token + shape.tp - 1) / shape.tp;
  } else if (term.split == ActivationSplit::sequence && shape.sequence_parallel) {
    tokens = (tokens + shape.tp - 1) / shape.tp;
  } else if (term.split == ActivationSplit::overlap_send) {
    tokens = tp_overlap_send_buffers(shape.tp) * ((tokens + shape.tp - 1) / shape.tp);
  }
  return tokens * per_token * term.bytes_per_element;
}

int64_t terms_bytes(std::span<const ActivationTerm> terms, const ActivationShape& shape) {
  int64_t total = 0;
  for (const ActivationTerm& t : terms) total += term_bytes(t, shape);
  return total;
}

bool term_kept(const ActivationTerm& term, RecomputeMode recompute) {
  switch (recompute) {
    case RecomputeMode::none: return !term.saved_only_by_op_policy;
    case RecomputeMode::selective: return term.kept_under_selective;
    case RecomputeMode::full: return term.is_block_input;
    case RecomputeMode::op_selective: return term.kept_under_op_selective;
  }
  return true;
}

int64_t recomputed_block_bytes(const ActivationTable& table, const ActivationShape& shape, RecomputeMode recompute) {
  int64_t bytes = 0;
  for (const ActivationTerm& t : table.block) {
    if (term_kept(t, RecomputeMode::none) && !term_kept(t, recompute)) bytes += term_bytes(t, shape);
  }
  return bytes;
}

BlockActivationBytes block_activation_bytes(const ActivationTable& table, const ActivationShape& shape,
                                            RecomputeMode recompute) {
  BlockActivationBytes out;
  if (recompute == RecomputeMode::full) out.shared = terms_bytes(table.shared_checkpoint_inputs, shape);
  // A checkpoint, whole-block or op-level, keeps the block's input as it came.
  const bool checkpointed = recompute == RecomputeMode::full || recompute == RecomputeMode::op_selective;
  for (const ActivationTerm& t : table.block) {
    const int64_t bytes = term_bytes(t, shape);
    if (checkpointed && t.is_block_input && t.checkpointed_bytes_per_element > 0) {
      ActivationTerm as_received = t;
      as_received.bytes_per_element = t.checkpointed_bytes_per_element;
      out.stash += term_bytes(as_received, shape);
      if (table.counts_recompute_working_set) out.working += bytes;  // the block's own copy, made again
    } else if (term_kept(t, recompute)) {
      out.stash += bytes;
    } else if (table.counts_recompute_working_set && term_kept(t, RecomputeMode::none)) {
      out.working += bytes;
    }
  }
  return out;
}

}  // namespace tessera::planner
