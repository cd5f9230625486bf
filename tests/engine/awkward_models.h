// Two small models of awkward sizes for the engine's tests: GPT-2 (a 97-token
// vocabulary, 72 wide, 3 layers of 3 heads of 24) and the Llama layout (a
// 101-token vocabulary, 48 wide, 3 layers of 6 heads of 8 on 2 key-value
// heads, an MLP of 136).
#pragma once

#include "tessera/planner/model.h"
#include "tessera/planner/registry.h"

namespace tessera::engine::testing {

inline constexpr const char* kAwkwardGpt2 = R"({"model_type":"gpt2","vocab_size":97,"n_embd":72,"n_layer":3,"n_head":3,"n_positions":16})";
inline constexpr const char* kAwkwardLlama = R"({"model_type":"llama","vocab_size":101,"hidden_size":48,"num_hidden_layers":3,"num_attention_heads":6,
                         "num_key_value_heads":2,"intermediate_size":136})";

// `num_layers` blocks (0: the JSON's 3).
inline planner::Model awkward_model(const char* json, int64_t num_layers = 0) {
  planner::ModelConfig c = planner::parse_model_config(json, "awkward").value();
  c.name = "awkward";
  if (num_layers > 0) c.num_layers = num_layers;
  return planner::make_model(c);
}

}  // namespace tessera::engine::testing
