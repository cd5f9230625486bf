// Shared by the tests against published runs (published_test.cpp,
// published_memory_test.cpp): the data files and the models their rows describe.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/planner/model_config.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/transformers_version.h"

namespace tessera::planner::testing {

// data/measurements/<file>, parsed.
inline nlohmann::json published_file(const std::string& file) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/data/measurements/" + file);
  return nlohmann::json::parse(in);
}

// A row's model: a shipped one by name, or its shape read as a Hugging Face
// config of its model_type. Megatron's GPT with --group-query-attention has no
// Hugging Face family (GPT-2 configs have no key-value heads), so a row's
// num_key_value_heads is set on the parsed shape.
inline Model published_model(const nlohmann::json& m) {
  if (m.contains("shipped")) return load_model(m["shipped"].get<std::string>()).value();
  nlohmann::json config{{"model_type", m["model_type"]},
                        {"hidden_size", m["hidden_size"]},
                        {"num_hidden_layers", m["num_layers"]},
                        {"num_attention_heads", m["num_attention_heads"]},
                        {"vocab_size", m["vocab_size"]},
                        {"n_positions", m["seq_len"]},
                        {"tie_word_embeddings", m.value("tie_word_embeddings", true)}};
  // GPT-2's config names the MLP width n_inner, the other families intermediate_size.
  if (m.contains("intermediate_size")) config[m["model_type"] == "gpt2" ? "n_inner" : "intermediate_size"] = m["intermediate_size"];
  if (m["model_type"] != "gpt2") config["max_position_embeddings"] = m["seq_len"];
  auto parsed = parse_model_config(config.dump(), "published");
  EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
  ModelConfig c = parsed.value();
  c.num_kv_heads = m.value("num_key_value_heads", c.num_heads);
  return make_model(c);
}

// The transformers release a row's "simulate" block names for the hf
// profiles (--transformers-version), or the measured one.
inline TransformersVersion row_transformers_version(const nlohmann::json& setup) {
  if (!setup.contains("transformers_version")) return kMeasuredTransformers;
  const auto version = parse_transformers_version(setup["transformers_version"].get<std::string>());
  EXPECT_TRUE(version.has_value()) << setup["transformers_version"];
  return version.value_or(kMeasuredTransformers);
}

}  // namespace tessera::planner::testing
