// What a transformer keeps for the backward pass, as a table of named terms.
//
// Three profiles:
//  - `megatron`: Korthikanti et al. 2022, "Reducing Activation Recomputation in
//    Large Transformer Models", §4: per layer s·b·h·(34 + 5·a·s/h) bytes in
//    16-bit (11sbh + 5as²b attention, 19sbh MLP, 4sbh layer-norm inputs);
//    10sbh of it is replicated under tensor parallelism unless sequence
//    parallelism splits it; selective recompute drops the 5as²b terms; full
//    recompute keeps the 2sbh layer input. Dropout masks appear only where the
//    model's config has dropout, and the terms follow the family's widths
//    (grouped-query K/V, SwiGLU's gate and up, a parallel residual's shared
//    norm input), so the paper's GPT-3 cases are reproduced exactly.
//  - `flash`: what GPU runtimes keep with a fused attention kernel (PyTorch
//    SDPA's flash backend, FlashAttention-2): Korthikanti's terms without the
//    s×s ones (scores, softmax, its dropout mask and output), plus one fp32
//    log-sum-exp per query row and head. The default for GPU plans.
//  - `hf` and `hf_eager`: Hugging Face transformers' own modules run eagerly
//    with 16-bit weights, as ColossalAI, DeepSpeed and FSDP's mixed precision
//    run them, with SDPA attention (transformers' default) or its eager
//    attention: every tensor autograd saves, measured on an H100
//    (activations_hf.cpp; tools/pytorch_saved_tensors.py) — the Python GELU's
//    intermediates, RMSNorm's fp32 copy, RoPE's tables, the loss's fp32 logits.
//    `hf_autocast`: the same models with fp32 weights under torch.autocast
//    (bf16), as the Hugging Face Trainer runs them: fp32 residual stream and
//    norms, a 16-bit cast of each matmul's input, and the cast weights kept
//    for backward (SDPA attention).
//  - `tessera`: exactly what Tessera's engine keeps: no dropout; a
//    FlashAttention-2 attention that keeps its output and one fp32
//    log-sum-exp per query row and head (no s² term); norm statistics in fp32; plus the working set of recomputing one layer, the
//    activation-gradient scratch of the backward pass and, under context
//    parallelism, the ring attention's buffers. The engine's memory
//    ledger tests hold the two equal.
//  - `tessera_gpu`: what the engine's GPU step keeps: `tessera` with 16-bit
//    logits (its fused cross-entropy never holds fp32 ones) and the device
//    copies of each micro-batch's tokens and targets.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/planner/model_config.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// How tensor parallelism divides a term (Korthikanti §4.2.2, §4.2.3).
enum class ActivationSplit {
  tensor_parallel,  // inside the tp region: always divided by t
  sequence,         // outside it (norm inputs, dropout masks): divided by t only with sequence parallelism
  gathered,         // a sequence-parallel rank's all-gathered copy of a sequence-split tensor: the whole sequence, only with sequence parallelism
  whole,            // every rank keeps all of it (the loss of each token)
  ring,             // context parallelism's ring attention buffers: split as tensor_parallel, only with cp > 1
  overlap_send,     // --tp-comm-overlap's outgoing partial chunks: tp_overlap_send_buffers(tp) chunks of this rank's tokens, only with it
};

struct ActivationTerm {
  std::string_view name;
  int64_t elements_per_token = 0;  // per token; per token and key position when per_key_position
  int64_t bytes_per_element = 0;
  bool per_key_position = false;   // attention scores: × seq_len (the s² terms)
  ActivationSplit split = ActivationSplit::tensor_parallel;
  bool kept_under_selective = true;  // false: dropped and recomputed by selective recompute
  bool is_block_input = false;     // the one term full recompute keeps
  // A checkpoint (full recompute, torchtitan's op-level policy) keeps the block's
  // input as it received it: 0 = this term's own width, else these bytes per
  // element (a 16-bit input of which the block itself keeps only an fp32 copy:
  // Hugging Face's Llama, torchtitan's Python RMSNorm).
  int64_t checkpointed_bytes_per_element = 0;
  bool per_position = false;       // shared by a micro-batch's sequences (RoPE's tables): seq_len rows, not b·s
  bool per_micro_batch = false;    // independent of the tokens (autocast's 16-bit copies of the weights): once per micro-batch
  bool kept_under_op_selective = false;  // saved by torchtitan's op-level policy (op_checkpoint_policy.h)
  bool saved_only_by_op_policy = false;  // a linear's output no backward op needs, which that policy saves all the same
};

struct ActivationTable {
  std::vector<ActivationTerm> block;             // one transformer block, per micro-batch
  std::vector<ActivationTerm> first_stage;       // kept by the stage holding the embedding
  std::vector<ActivationTerm> last_stage;        // final norm and head inputs
  std::vector<ActivationTerm> logits;            // logits and loss buffers (category `logits`)
  // Kept once per micro-batch by a stage's blocks together under full recompute: an
  // input every checkpointed block receives (transformers' [b, 1, s, s] attention mask).
  std::vector<ActivationTerm> shared_checkpoint_inputs;
  std::vector<ActivationTerm> backward_scratch;  // activation gradients, once per stage (tessera)
  // Add what one recomputed block keeps again while its backward runs (tessera,
  // torchtitan's eager block).
  bool counts_recompute_working_set = false;
  // Autograd frees the loss's tensors before the last block's backward recomputes
  // it (torchtitan's eager block), so that working set and the logits never
  // coexist; the engine's buffers do (tessera).
  bool working_set_after_loss = false;
};

// Whose block the flash profile's terms describe: the profile's own (fused
// kernels, or torch.compile's), or torchtitan's Llama block run op by op
// (--runtime torchtitan without --torch-compile: activations_torchtitan.h),
// with its Python RMSNorm or its Triton one (--fused-rmsnorm).
enum class BlockAccounting { profile, torchtitan_eager, torchtitan_eager_fused_rmsnorm };
// The flash profile under torchtitan's eager execution (eager_elementwise.h) is
// its eager block; everything else is the profile's.
BlockAccounting block_accounting(const ModelConfig& config, const PluginOptions& plugin, const TrainingOptions& training);

// `transformers`: the release the hf profiles describe (transformers_version.h).
ActivationTable activation_table(const ModelConfig& config, ActivationProfile profile, Precision precision,
                                 TransformersVersion transformers = kMeasuredTransformers, BlockAccounting block = BlockAccounting::profile);

// Whose loss the flash profile's logits are held by: the profile's own (one
// fp32 copy of the logits, overwritten by their gradient), Megatron-Core's
// (--runtime megatron: the 16-bit logits beside that copy) or torchtitan's
// eager cross entropy (--runtime torchtitan without torch.compile: three fp32
// tensors of the logits' size at backward's start).
enum class LossAccounting { profile, megatron_core, torchtitan_eager };
// Under --runtime megatron or torchtitan the flash profile's logits are held as
// that runtime's loss holds them; a torchtitan loss compiled with its blocks is
// left to the profile (what inductor's fused kernel keeps has not been read).
LossAccounting loss_accounting(const PluginOptions& plugin, const TrainingOptions& training);
ActivationTable with_loss(ActivationTable table, LossAccounting loss, Precision precision);

// The activation table a request's estimate counts: its profile's, or its
// runtime's eager block (block_accounting), with its runtime's loss.
ActivationTable request_activation_table(const ModelConfig& config, const PluginOptions& plugin, const TrainingOptions& training);

struct ActivationShape {
  int64_t micro_batch_size = 1;
  int64_t seq_len = 1;
  int64_t tp = 1;
  bool sequence_parallel = false;
  int64_t cp = 1;  // context-parallel ranks: seq_len is this rank's share of each sequence
  bool tp_comm_overlap = false;  // sequence parallelism's calls run as tp_overlap_schedule.h's chunks
};

// A request's shape: under context parallelism a rank keeps the terms of its
// own tokens (EstimateRequest::local_seq_len); flash attention keeps no term
// per key position, so the ring's remote keys leave nothing behind.
inline ActivationShape activation_shape(const EstimateRequest& r) {
  return ActivationShape{r.training.micro_batch_size, r.local_seq_len(), r.layout.tp, r.layout.sequence_parallel, r.layout.cp, r.plugin.tp_comm_overlap};
}

int64_t term_bytes(const ActivationTerm& term, const ActivationShape& shape);

// Bytes of the given terms, for one micro-batch.
int64_t terms_bytes(std::span<const ActivationTerm> terms, const ActivationShape& shape);

// Whether a block keeps `term` from forward to backward under `recompute`
// (otherwise backward recomputes it); the engine allocates by the same rule.
bool term_kept(const ActivationTerm& term, RecomputeMode recompute);

// Bytes of the terms a block keeps without recompute that backward
// recomputes under `recompute`: what the recompute writes again.
int64_t recomputed_block_bytes(const ActivationTable& table, const ActivationShape& shape, RecomputeMode recompute);

// One block's bytes for one micro-batch under a recompute mode.
struct BlockActivationBytes {
  int64_t stash = 0;    // kept from forward until the block's backward
  int64_t working = 0;  // recomputed tensors alive while one block runs its backward
  int64_t shared = 0;   // kept once per micro-batch by a stage's blocks together (shared_checkpoint_inputs)
};

BlockActivationBytes block_activation_bytes(const ActivationTable& table, const ActivationShape& shape,
                                            RecomputeMode recompute);

}  // namespace tessera::planner
