// The element-wise traffic of torchtitan's Llama block run eagerly (its
// default, `training.compile = false`): each PyTorch op outside the GEMMs and
// SDPA is its own kernel, reading its inputs from HBM and writing its output
// there, in forward and again, with its gradient, in backward. The simulator
// charges these bytes at HBM speed in place of the once-per-kept-activation
// traffic it charges runtimes that fuse element-wise work (simulate.cpp).
//
// The ops, from torchtitan's model (pytorch/torchtitan, torchtitan/models/llama/model.py
// and models/norms.py as of the 2024 performance tables, e.g. 0199cbc):
//  - RMSNorm, twice: x.float(), pow(2), mean(-1), x * rsqrt(...), .type_as(x),
//    * weight (per-row scalars cost nothing);
//  - RoPE on q and k: .float(), a complex multiply by freqs_cis, .type_as();
//  - repeat_kv under grouped-query attention: keys and values copied out to
//    every query head (expand + reshape), and summed back in backward;
//  - the two residual adds, SiLU and the SwiGLU product.
// SDPA's transposes are views (its flash kernel takes the strides). Backward
// counts each op's autograd formula: an input's gradient from the output's
// and the saved operands, the norm weight's gradient as a reduction over
// tokens, and the sums where two gradients meet (the norm's input, the
// residual stream). A cast between equal dtypes (fp32 runs) is free.
#pragma once

#include <cstdint>

#include "tessera/planner/model_config.h"

namespace tessera::planner {

struct ElementwiseBytes {
  double forward = 0;   // bytes per token through HBM, one block
  double backward = 0;
};

ElementwiseBytes torchtitan_eager_block_bytes(const ModelConfig& config, int64_t dtype_bytes);

}  // namespace tessera::planner
