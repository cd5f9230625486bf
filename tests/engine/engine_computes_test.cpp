// The config.json fields the engine computes or refuses (engine/model/engine_computes.h),
// read from config text as transformers 4.51.3 and 5.23.0 read it.
#include <gtest/gtest.h>

#include <string>

#include "tessera/engine/model/engine_computes.h"
#include "tessera/planner/model_config.h"

namespace tessera::engine {
namespace {

const std::string kGpt2 = R"("model_type":"gpt2","vocab_size":11,"n_embd":8,"n_layer":2,"n_head":2,"n_positions":64)";
const std::string kMistral = R"("model_type":"mistral","vocab_size":13,"hidden_size":8,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":12)";
const std::string kQwen2 = R"("model_type":"qwen2","vocab_size":13,"hidden_size":8,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":12)";
const std::string kLlama = R"("model_type":"llama","vocab_size":13,"hidden_size":8,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":12)";

planner::ModelConfig read(const std::string& fields, const std::string& extra = "") {
  auto config = planner::parse_model_config("{" + fields + (extra.empty() ? "" : "," + extra) + "}", "config.json");
  EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error().message);
  return config.ok() ? config.value() : planner::ModelConfig{};
}

// The refusal's one line, or "" when the engine computes the config at `seq`.
std::string refusal(const std::string& fields, const std::string& extra, int64_t seq = 16) {
  const Status s = check_engine_computes(read(fields, extra), seq);
  return s ? "" : s.error().message;
}

TEST(EngineComputes, Gpt2AcceptsEveryNameOfGeluTanh) {
  for (const char* name : {"gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate", "gelu_python_tanh"}) {
    EXPECT_EQ(refusal(kGpt2, std::string(R"("activation_function":")") + name + "\""), "") << name;
  }
  EXPECT_EQ(refusal(kGpt2, ""), "") << "GPT2Config's default is gelu_new";
}

TEST(EngineComputes, Gpt2RefusesOtherActivationsNamingTheFieldAndTheFix) {
  for (const char* name : {"gelu", "quick_gelu", "relu", "gelu_10", "silu"}) {
    const std::string message = refusal(kGpt2, std::string(R"("activation_function":")") + name + "\"");
    EXPECT_NE(message.find(std::string("activation_function is '") + name + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(R"(set activation_function to "gelu_new")"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
}

TEST(EngineComputes, LlamaLayoutsAcceptSiluAndSwishOnly) {
  EXPECT_EQ(refusal(kLlama, R"("hidden_act":"swish")"), "");
  EXPECT_EQ(refusal(kQwen2, R"("hidden_act":"silu")"), "");
  EXPECT_NE(refusal(kLlama, R"("hidden_act":"gelu")").find(R"(hidden_act is 'gelu')"), std::string::npos);
}

TEST(EngineComputes, AnyRopeScalingIsRefusedAndDefaultIsNone) {
  EXPECT_EQ(refusal(kLlama, R"("rope_scaling":null)"), "");
  EXPECT_EQ(refusal(kLlama, R"("rope_scaling":{"rope_type":"default"})"), "") << "rope_type default is unscaled RoPE";
  for (const char* scaling : {R"({"rope_type":"llama3","factor":8.0})", R"({"type":"linear","factor":2.0})", R"({"factor":2.0})"}) {
    const std::string message = refusal(kLlama, std::string(R"("rope_scaling":)") + scaling);
    EXPECT_NE(message.find("config.json's rope_scaling asks for"), std::string::npos) << message;
    EXPECT_NE(message.find("remove rope_scaling"), std::string::npos) << message;
  }
  EXPECT_NE(refusal(kLlama, R"("rope_scaling":{"type":"linear","factor":2.0})").find("'linear'"), std::string::npos);
}

TEST(EngineComputes, TransformersFiveRopeParametersAreRead) {
  EXPECT_EQ(refusal(kLlama, R"("rope_parameters":{"rope_type":"default","rope_theta":500000.0})"), "");
  EXPECT_DOUBLE_EQ(read(kLlama, R"("rope_parameters":{"rope_type":"default","rope_theta":500000.0})").rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(read(kLlama, R"("rope_theta":250000.0)").rope_theta, 250000.0);
  EXPECT_DOUBLE_EQ(read(kLlama, "").rope_theta, 10000.0);
  const std::string message = refusal(kLlama, R"("rope_parameters":{"rope_type":"yarn","factor":4.0,"rope_theta":10000.0})");
  EXPECT_NE(message.find("config.json's rope_parameters asks for 'yarn'"), std::string::npos) << message;
  // rope_scaling replaces rope_parameters where both are set (5.23.0 convert_rope_params_to_dict).
  EXPECT_NE(refusal(kLlama, R"("rope_scaling":{"rope_type":"dynamic"},"rope_parameters":{"rope_type":"default"})").find("rope_scaling asks for 'dynamic'"),
            std::string::npos);
  auto disagreeing = planner::parse_model_config("{" + kLlama + R"(,"rope_theta":10000.0,"rope_parameters":{"rope_theta":500000.0}})", "config.json");
  ASSERT_FALSE(disagreeing.ok());
  EXPECT_NE(disagreeing.error().message.find("field 'rope_parameters' sets rope_theta 500000 but the top-level rope_theta is 10000"), std::string::npos)
      << disagreeing.error().message;
}

TEST(EngineComputes, SlidingWindowsAtOrAboveTheSequenceChangeNothing) {
  EXPECT_EQ(read(kMistral).sliding_window, 4096) << "MistralConfig's default";
  EXPECT_EQ(read(kMistral, R"("sliding_window":null)").sliding_window, 0);
  EXPECT_EQ(refusal(kMistral, R"("sliding_window":16)", 16), "");
  EXPECT_EQ(refusal(kMistral, R"("sliding_window":null)", 8192), "");
  EXPECT_EQ(refusal(kMistral, "", 4096), "");
  const std::string message = refusal(kMistral, R"("sliding_window":8)", 16);
  EXPECT_EQ(message, "--seq 16 is longer than config.json's sliding_window 8, which the engine does not apply; use --seq 8 or less");
  EXPECT_NE(refusal(kMistral, "", 4097).find("sliding_window 4096"), std::string::npos) << "an absent window is 4096";
}

TEST(EngineComputes, Qwen2WindowsWhateverUseSlidingWindowSays) {
  // transformers 4.51.3 masks eager and SDPA attention by sliding_window even with use_sliding_window false.
  EXPECT_EQ(read(kQwen2, R"("use_sliding_window":false,"sliding_window":32)").sliding_window, 32);
  EXPECT_NE(refusal(kQwen2, R"("use_sliding_window":false,"sliding_window":8)", 16).find("sliding_window 8"), std::string::npos);
  EXPECT_EQ(refusal(kQwen2, R"("use_sliding_window":false,"sliding_window":131072)", 4096), "");
  EXPECT_EQ(read(kQwen2).sliding_window, 4096) << "Qwen2Config's default";
}

TEST(EngineComputes, Gpt2AttentionScaleOtherThanStandardIsRefused) {
  EXPECT_NE(refusal(kGpt2, R"("scale_attn_by_inverse_layer_idx":true)").find("scale_attn_by_inverse_layer_idx"), std::string::npos);
  EXPECT_NE(refusal(kGpt2, R"("scale_attn_weights":false)").find("remove both"), std::string::npos);
  EXPECT_EQ(refusal(kGpt2, R"("scale_attn_weights":true,"scale_attn_by_inverse_layer_idx":false)"), "");
}

}  // namespace
}  // namespace tessera::engine
