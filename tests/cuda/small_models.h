// The small models and token streams of the GPU training tests
// (gpt_training_gpu_test.cpp, ddp_gpu_test.cpp): awkward sizes, a 97-token
// vocabulary, 128 wide, 2 layers.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "tessera/planner/model.h"
#include "tessera/planner/registry.h"

namespace tessera::engine::cuda::testing {

// GPT-2 (LayerNorm, GELU, learned positions, tied head, q | k | v per token)
// and Qwen2 (RMSNorm, SwiGLU of an awkward 200, RoPE, grouped-query heads 4:2
// of 32, q/k/v biases, untied head, q, k, v in three blocks).
inline const char* kSmallGpt2 = R"({"model_type":"gpt2","vocab_size":97,"n_embd":128,"n_layer":2,"n_head":2,"n_positions":64})";
inline const char* kSmallQwen2 = R"({"model_type":"qwen2","vocab_size":97,"hidden_size":128,"num_hidden_layers":2,"num_attention_heads":4,
                                    "num_key_value_heads":2,"intermediate_size":200})";

// `num_layers` blocks (0: the JSON's 2).
inline planner::Model small_model(const char* json, int64_t num_layers = 0) {
  planner::ModelConfig c = planner::parse_model_config(json, "small").value();
  c.name = "small";
  if (num_layers > 0) c.num_layers = num_layers;
  return planner::make_model(c);
}

inline std::vector<int32_t> random_tokens(size_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> out(n);
  for (auto& t : out) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return out;
}

}  // namespace tessera::engine::cuda::testing
