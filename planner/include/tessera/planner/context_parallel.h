// How context parallelism splits each sequence over its cp ranks: the
// load-balanced causal split of Megatron-LM (megatron/training/utils.py,
// get_batch_on_this_cp_rank, NVIDIA/Megatron-LM@00caa53af30912914981c86f39db123961678bbd)
// that Transformer Engine's ring attention expects
// (transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py,
// AttnFuncWithCPAndKVP2P, NVIDIA/TransformerEngine@9c61cd7e5e0c93217ad38d4682568ff5dde4f08b):
// the sequence is cut into 2·cp equal chunks and rank r keeps chunks r and
// 2·cp − 1 − r, in that order, so that under the causal mask every rank's
// queries see as many keys as every other's (what the simulator's 1/cp of the
// attention per rank assumes, simulate.cpp). The sequence must divide by
// 2·cp (check_context_parallel_sequence). The split itself, with a worked
// example: context_split.h.
#pragma once

#include <cstdint>

#include "tessera/planner/context_split.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// The ring's traffic (Transformer Engine's AttnFuncWithCPAndKVP2P): each step
// a rank sends one block, its keys and values for its b · s/cp tokens,
// kv_width/tp wide each; per layer and micro-batch cp − 1 steps forward (an
// all-gather's ring) and 2 · (cp − 1) backward (the blocks again, and their
// gradients as a reduce-scatter's ring): what the simulator times and the
// engine's ring attention sends.
inline int64_t ring_block_elements(int64_t micro_batch, int64_t local_seq_len, int64_t kv_width, int64_t tp) {
  return 2 * micro_batch * local_seq_len * kv_width / tp;
}
struct RingSends {
  int64_t forward = 0, backward = 0;  // per layer and micro-batch
};
// Recomputing the attention core (selective: Megatron-Core's core_attn, the
// engine's BlockRerun::attention) or the whole block (full) runs the ring's
// forward again inside backward: cp − 1 more sends there. torchtitan's
// op-level policy keeps the attention op's output, so its ring runs once.
inline bool recompute_reruns_ring(RecomputeMode recompute) { return recompute == RecomputeMode::selective || recompute == RecomputeMode::full; }
inline RingSends ring_sends(int64_t cp, RecomputeMode recompute) {
  return RingSends{cp - 1, (recompute_reruns_ring(recompute) ? 3 : 2) * (cp - 1)};
}

}  // namespace tessera::planner
