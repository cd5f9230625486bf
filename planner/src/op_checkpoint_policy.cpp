#include "tessera/planner/op_checkpoint_policy.h"

namespace tessera::planner {

bool is_torchtitan_llama_block(const ModelConfig& c) {
  const bool llama_family = c.family == ModelFamily::llama || c.family == ModelFamily::mistral || c.family == ModelFamily::qwen2;
  return llama_family && c.mlp == MlpKind::swiglu && !c.parallel_residual && c.attention_dropout == 0 && c.hidden_dropout == 0;
}

std::vector<OpPolicyLinear> op_policy_linears(const ModelConfig& c) {
  const int64_t h = c.hidden_size;
  const int64_t I = c.intermediate_size;
  // Forward order, with the output's term in the flash profile (activations.cpp).
  std::vector<OpPolicyLinear> linears{
      {"wq", "query", c.q_width(), h, false},  {"wk", "key", c.kv_width(), h, false},
      {"wv", "value", c.kv_width(), h, false}, {"wo", "attn_proj_output", h, c.q_width(), true},
      {"w1", "mlp_gate", I, h, false},         {"w3", "mlp_up", I, h, false},
      {"w2", "mlp_output", h, I, true},
  };
  const auto has_bias = [&](std::string_view name) {
    if (name == "wq" || name == "wk" || name == "wv") return c.qkv_bias;
    if (name == "wo") return c.attn_out_bias;
    return c.mlp_bias;
  };
  int mm_count = 0;
  for (OpPolicyLinear& linear : linears) {
    if (!has_bias(linear.name)) linear.saved = ++mm_count % 2 == 1;  // every second mm is recomputed
    linear.recomputed = !linear.saved;
  }
  linears.back().recomputed = false;  // early stop: nothing backward needs comes after it
  return linears;
}

double op_policy_recompute_flops_per_token(const ModelConfig& c) {
  double flops = 0;
  for (const OpPolicyLinear& linear : op_policy_linears(c)) {
    if (linear.recomputed) flops += 2.0 * static_cast<double>(linear.out_features) * static_cast<double>(linear.in_features);
  }
  return flops;
}

std::string op_policy_summary(const ModelConfig& c) {
  std::string saved, recomputed;
  for (const OpPolicyLinear& linear : op_policy_linears(c)) {
    if (!linear.saved && !linear.recomputed) continue;  // an unsaved last linear: neither kept nor run again
    std::string& list = linear.saved ? saved : recomputed;
    list += (list.empty() ? "" : ", ") + std::string(linear.name);
  }
  return "each block keeps its input, the outputs of " + (saved.empty() ? "no linear" : saved) +
         " and SDPA's output and log-sum-exp; backward runs " + (recomputed.empty() ? "no linear" : recomputed) +
         " and the element-wise ops again";
}

}  // namespace tessera::planner
