// torchtitan's op-level selective activation checkpointing (`--recompute
// op_selective`; torchtitan's `[activation_checkpoint] mode = "selective",
// selective_ac_option = "op"`), read from pytorch/torchtitan@01c79fdf6ce3ca7ed1f6808ba8a395a155bbdc40,
// torchtitan/models/llama3/parallelize_llama.py (`_save_list`,
// `_apply_ac_to_transformer_block`):
//  - each transformer block runs under torch.utils.checkpoint with a policy
//    that sees every aten op of its forward; the policy's counter starts again
//    for each block (a fresh `meta` per checkpoint context);
//  - the outputs of `aten.mm` are saved, except every second one (the 2nd,
//    4th, ... mm of the block), and so are the outputs of SDPA's flash and
//    memory-efficient kernels (the attention output and its log-sum-exp);
//    everything else (norms, RoPE, SiLU, the products, the residual adds) is
//    recomputed in backward from the block's input and the saved tensors.
// Which linears are `aten.mm`: a linear without bias on a 3-D input is
// `matmul`, which folds to one `mm`; with a bias it is `addmm`
// (pytorch/pytorch@006b3e67c188b7b0d27b543e9536076d6b389c85,
// aten/src/ATen/native/Linear.cpp, `linear` and `_flatten_3d_linear`), which
// the policy does not save and does not count.
// The block's linears in forward order are torchtitan's Llama block
// (torchtitan/models/llama3/model/model.py: Attention.forward runs wq, wk, wv,
// SDPA, wo; FeedForward.forward is w2(silu(w1(x)) * w3(x))), which the Llama,
// Mistral and Qwen2 configs share. For a Llama block without biases that is
// 7 mm: wq, wv, w1 and w2 saved, wk, wo and w3 recomputed.
// Backward re-runs the block's forward only as far as it needs (the
// checkpoint's early stop, on by default): the last linear's output feeds
// only the residual add, which keeps nothing, so an unsaved last linear is
// not run again.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/planner/model_config.h"

namespace tessera::planner {

struct OpPolicyLinear {
  std::string_view name;         // torchtitan's module name
  std::string_view output_term;  // the activation term (activations.h) its output is
  int64_t out_features = 0;
  int64_t in_features = 0;
  bool row_parallel = false;     // its input, not its output, is split over tp ranks
  bool saved = false;            // its output is kept from forward to backward
  bool recomputed = false;       // backward runs it again
};

// Whether the model's blocks are torchtitan's Llama block (separate q, k and v
// projections, a SwiGLU MLP, no dropout, a sequential residual).
bool is_torchtitan_llama_block(const ModelConfig& config);

// The block's linears in forward order, with what the policy does to each.
std::vector<OpPolicyLinear> op_policy_linears(const ModelConfig& config);

// Forward FLOPs per token that backward runs again, per block.
double op_policy_recompute_flops_per_token(const ModelConfig& config);

// "each block keeps its input, the outputs of wq, wv, w1, w2 and SDPA's output
// and log-sum-exp; backward runs wk, wo, w3 and the element-wise ops again": for reports.
std::string op_policy_summary(const ModelConfig& config);

}  // namespace tessera::planner
