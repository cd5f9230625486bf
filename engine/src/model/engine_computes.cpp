// The config fields the engine computes, and the refusal of the rest; see engine_computes.h.
#include "tessera/engine/model/engine_computes.h"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

namespace tessera::engine {

using planner::ModelFamily;

namespace {

bool is_llama_layout(ModelFamily f) { return f == ModelFamily::llama || f == ModelFamily::mistral || f == ModelFamily::qwen2; }

// The names under which transformers' ACT2FN computes GELU's tanh approximation,
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), which the engine's GPT-2 MLP computes:
// NewGELUActivation, PytorchGELUTanh / GELUTanh (torch's gelu(approximate="tanh")),
// FastGELUActivation (0.7978845608 = √(2/π)) and AccurateGELUActivation
// (transformers 4.51.3 and 5.23.0 src/transformers/activations.py, ACT2CLS; 5.x
// adds gelu_python_tanh, GELUTanh's Python form). "gelu" is the exact erf GELU,
// "quick_gelu" x·σ(1.702x): other functions.
constexpr std::array<std::string_view, 5> kGeluTanhNames{"gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate", "gelu_python_tanh"};
// SiLU, x·σ(x), for the Llama-style MLP: ACT2CLS maps "silu" and "swish" to it.
constexpr std::array<std::string_view, 2> kSiluNames{"silu", "swish"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

Status check_activation(const planner::ModelConfig& c) {
  const bool gpt2 = c.family == ModelFamily::gpt2;
  if (gpt2 ? contains(kGeluTanhNames, c.activation) : contains(kSiluNames, c.activation)) return Status::success();
  const std::string field = gpt2 ? "activation_function" : "hidden_act";
  return make_error(ErrorCode::unsupported, "--model: config.json's " + field + " is '" + c.activation + "' but the engine computes " +
                                                (gpt2 ? "GELU's tanh approximation" : "SiLU") + "; set " + field + " to \"" +
                                                (gpt2 ? "gelu_new" : "silu") + "\" or train this model with another runtime");
}

}  // namespace

Status check_engine_computes(const planner::ModelConfig& c, int64_t seq_len) {
  if (c.family != ModelFamily::gpt2 && !is_llama_layout(c.family)) {
    return make_error(ErrorCode::unsupported, "the engine trains gpt2 and llama-style models (llama, mistral, qwen2), not " +
                                                  std::string(planner::to_string(c.family)));
  }
  if (is_llama_layout(c.family) && c.mlp_bias) return make_error(ErrorCode::unsupported, "the engine does not train Llama MLPs with biases yet");
  if (Status s = check_activation(c); !s) return s;
  if (!c.rope_scaling.empty()) {
    return make_error(ErrorCode::unsupported, "--model: config.json's " + c.rope_scaling_field + " asks for '" + c.rope_scaling +
                                                  "' RoPE scaling, which the engine does not compute; remove " + c.rope_scaling_field +
                                                  " (or set it to null) to train with unscaled RoPE");
  }
  // A window of W keeps the last W keys of each query (transformers masks key j
  // of query i where j <= i - W), so at W or fewer positions it masks nothing.
  if (c.sliding_window > 0 && seq_len > c.sliding_window) {
    return make_error(ErrorCode::unsupported, "--seq " + std::to_string(seq_len) + " is longer than config.json's sliding_window " +
                                                  std::to_string(c.sliding_window) + ", which the engine does not apply; use --seq " +
                                                  std::to_string(c.sliding_window) + " or less");
  }
  if (!c.standard_attention_scale) {
    return make_error(ErrorCode::unsupported, "--model: config.json sets scale_attn_weights false or scale_attn_by_inverse_layer_idx true, "
                                              "which the engine does not compute; remove both to train with GPT-2's 1/sqrt(head_dim) scale");
  }
  return Status::success();
}

}  // namespace tessera::engine
