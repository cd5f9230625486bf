// What torchtitan's Llama block keeps for backward when it runs eagerly, op by
// op (--runtime torchtitan without --torch-compile): the tensors autograd saves
// for each PyTorch op of the block, in place of the flash profile's terms, which
// describe fused kernels.
#pragma once

#include "tessera/planner/activations.h"

namespace tessera::planner {

// `dt`: the activations' bytes per element (2 under bf16, FSDP2's param_dtype;
// 4 under fp32). `fused_rmsnorm`: torchtitan's Triton RMSNorm in place of the
// Python one (PluginOptions::fused_rmsnorm).
ActivationTable torchtitan_eager_table(const ModelConfig& c, int64_t dt, bool fused_rmsnorm);

}  // namespace tessera::planner
