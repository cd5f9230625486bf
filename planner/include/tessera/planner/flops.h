// Floating-point operations per token for training, from the tensor inventory.
//
// A matmul with a (k, n) weight costs 2·k·n FLOPs per token forward (one
// multiply and one add per weight). Attention adds QK^T and AV: 2·s·d each for a
// query width d, i.e. 4·s·d per layer per token, counted without causal
// masking as in Narayanan et al. 2021 ("Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM", §5.1: 24Bsh² + 4Bs²h per layer).
// Backward costs twice the forward (gradients for inputs and for weights).
// Element-wise work (norms, activations, softmax) is left out: it is
// memory-bound and under 1% of the FLOPs of any model here.
#pragma once

#include <cstdint>

#include "tessera/planner/model.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct FlopsPerToken {
  double forward = 0;    // matmuls + attention, all layers and the head
  double backward = 0;   // 2 × forward
  double recompute = 0;  // extra forward work under the recompute mode
  double total() const { return forward + backward + recompute; }
};

// Forward FLOPs per token of one transformer block (matmuls + attention).
double block_forward_flops_per_token(const Model& model, int layer, int64_t seq_len);

// Forward FLOPs per token outside the blocks: the head (and OPT's projections).
double outside_blocks_forward_flops_per_token(const Model& model);

FlopsPerToken flops_per_token(const Model& model, int64_t seq_len, RecomputeMode recompute);

// The request's: its recompute mode, and under --recompute-num-layers only the
// blocks its pipeline's chunks recompute whole (recompute_blocks.h).
FlopsPerToken flops_per_token(const Model& model, const EstimateRequest& request);

}  // namespace tessera::planner
