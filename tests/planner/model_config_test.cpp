#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tessera/planner/model_config.h"

namespace tessera::planner {
namespace {

Result<ModelConfig> parse(const std::string& text) { return parse_model_config(text, "test.json"); }

TEST(ModelConfig, AcceptsEveryHiddenSizeAlias) {
  for (const char* field : {"n_embd", "n_embed", "hidden_size"}) {
    const std::string text = std::string(R"({"model_type":"gpt2","vocab_size":100,"n_layer":2,"n_head":4,")") + field + R"(":64})";
    auto config = parse(text);
    ASSERT_TRUE(config.ok()) << field << ": " << config.error().message;
    EXPECT_EQ(config->hidden_size, 64) << field;
    EXPECT_EQ(config->intermediate_size, 256) << "n_inner absent means 4 * n_embd";
  }
}

TEST(ModelConfig, AcceptsLayerAndHeadAliases) {
  auto a = parse(R"({"model_type":"llama","vocab_size":100,"hidden_size":64,"num_hidden_layers":3,"num_attention_heads":4})");
  auto b = parse(R"({"model_type":"llama","vocab_size":100,"hidden_size":64,"n_layer":3,"n_head":4})");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->num_layers, b->num_layers);
  EXPECT_EQ(a->num_heads, b->num_heads);
  EXPECT_EQ(a->num_kv_heads, 4) << "without num_key_value_heads every head has its own K/V";
}

TEST(ModelConfig, ConflictingAliasesAreAnError) {
  auto config = parse(R"({"model_type":"gpt2","vocab_size":100,"n_layer":2,"n_head":4,"n_embd":64,"hidden_size":128})");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message.find("hidden_size"), std::string::npos);
}

TEST(ModelConfig, TieWordEmbeddingsFollowsEachFamilysDefault) {
  const std::string sizes = R"("vocab_size":100,"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4)";
  for (auto [type, tied] : {std::pair{"gpt2", true}, std::pair{"llama", false}, std::pair{"mistral", false}, std::pair{"qwen2", false},
                            std::pair{"opt", true}, std::pair{"bloom", true}, std::pair{"gpt_neox", false}}) {
    auto config = parse(std::string(R"({"model_type":")") + type + R"(",)" + sizes + "}");
    ASSERT_TRUE(config.ok()) << type << ": " << config.error().message;
    EXPECT_EQ(config->tie_word_embeddings, tied) << type;
  }
  auto untied = parse(R"({"model_type":"gpt2","tie_word_embeddings":false,)" + sizes + "}");
  ASSERT_TRUE(untied.ok());
  EXPECT_FALSE(untied->tie_word_embeddings);
}

TEST(ModelConfig, ErrorsNameTheField) {
  struct Case {
    const char* text;
    const char* mentions;
  };
  for (const Case& c : {Case{R"({"model_type":"t5"})", "model_type 't5' is not supported"},
                        Case{R"({"vocab_size":10})", "missing field 'model_type'"},
                        Case{R"({"model_type":"gpt2","vocab_size":100,"n_layer":2,"n_head":4})", "'hidden_size' or 'n_embd'"},
                        Case{R"({"model_type":"gpt2","vocab_size":100,"n_layer":2,"n_head":4,"n_embd":"big"})", "field 'n_embd'"},
                        Case{R"({"model_type":"gpt2","vocab_size":100,"n_layer":-2,"n_head":4,"n_embd":64})", "field 'n_layer'"},
                        Case{R"({"model_type":"gpt2","vocab_size":100,"n_layer":2,"n_head":5,"n_embd":64})", "num_attention_heads"},
                        Case{R"({"model_type":"llama","vocab_size":100,"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":3})", "num_key_value_heads"},
                        Case{R"({"model_type":"gpt2",)", "not valid JSON"},
                        Case{R"([1,2,3])", "expected a JSON object"}}) {
    auto config = parse(c.text);
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_NE(config.error().message.find(c.mentions), std::string::npos) << config.error().message;
    EXPECT_EQ(config.error().message.find('\n'), std::string::npos) << "one line";
  }
}

TEST(ModelConfig, ExplicitHeadDimOverridesHiddenOverHeads) {
  auto config = parse(R"({"model_type":"llama","vocab_size":100,"hidden_size":96,"num_hidden_layers":2,"num_attention_heads":4,"head_dim":32})");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->head_dim, 32);
  EXPECT_EQ(config->q_width(), 128);
}

TEST(ModelConfig, ReadsTheConfigInsideAModelDirectory) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tessera-test-tiny-llama";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type":"llama","vocab_size":100,"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4})";
  auto config = load_model_config_file(dir.string(), "--model");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->name, "tessera-test-tiny-llama");
  EXPECT_EQ(config->num_layers, 2);
}

TEST(ModelConfig, MissingFileIsNotFound) {
  auto config = load_model_config_file("/nonexistent/config.json", "--model");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().code, ErrorCode::not_found);
}

}  // namespace
}  // namespace tessera::planner
