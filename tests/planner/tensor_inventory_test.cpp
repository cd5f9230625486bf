#include <gtest/gtest.h>

#include <set>

#include "test_models.h"

namespace tessera::planner {
namespace {

using testing::shipped_model;

struct ExpectedCount {
  const char* name;
  int64_t parameters;
};

// Published counts: Hugging Face model cards and num_parameters() of the transformers classes.
class ParameterCount : public ::testing::TestWithParam<ExpectedCount> {};

TEST_P(ParameterCount, MatchesHuggingFace) {
  const Model model = shipped_model(GetParam().name);
  EXPECT_EQ(model.parameter_count, GetParam().parameters);
  EXPECT_EQ(model.inventory.parameter_count(), GetParam().parameters);
}

INSTANTIATE_TEST_SUITE_P(ShippedModels, ParameterCount,
                         ::testing::Values(ExpectedCount{"gpt2", 124'439'808}, ExpectedCount{"gpt2-medium", 354'823'168},
                                           ExpectedCount{"gpt2-large", 774'030'080}, ExpectedCount{"gpt2-xl", 1'557'611'200},
                                           ExpectedCount{"llama-2-7b", 6'738'415'616}, ExpectedCount{"llama-2-13b", 13'015'864'320},
                                           ExpectedCount{"llama-2-70b", 68'976'648'192}, ExpectedCount{"llama-3-8b", 8'030'261'248},
                                           ExpectedCount{"llama-3-70b", 70'553'706'496}, ExpectedCount{"mistral-7b", 7'241'732'096},
                                           ExpectedCount{"qwen2-0.5b", 494'032'768}, ExpectedCount{"qwen2-7b", 7'615'616'512},
                                           ExpectedCount{"opt-1.3b", 1'315'758'080}, ExpectedCount{"gpt-neox-20b", 20'554'567'680},
                                           ExpectedCount{"bloom-176b", 176'247'271'424}, ExpectedCount{"gpt3-175b", 174'604'259'328},
                                           ExpectedCount{"zero-7.5b", 7'463'923'712},
                                           // 2 × 128256 × 16384 + 126 × (2·16384² + 2·16384·1024 + 3·16384·53248 + 2·16384) + 16384
                                           ExpectedCount{"llama-3.1-405b", 405'853'388'800}),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           for (char& ch : name) if (ch == '-' || ch == '.') ch = '_';
                           return name;
                         });

TEST(TensorInventory, Gpt2NamesShapesAndOrderFollowHuggingFace) {
  const Model model = shipped_model("gpt2");
  const auto& t = model.inventory.tensors;
  ASSERT_EQ(t.size(), 2u + 12u * 12u + 2u + 1u);
  EXPECT_EQ(t.front().name, "transformer.wte.weight");
  EXPECT_EQ(t.front().shape, (std::vector<int64_t>{50257, 768}));
  EXPECT_EQ(t[1].name, "transformer.wpe.weight");
  EXPECT_EQ(t[2].name, "transformer.h.0.ln_1.weight");
  EXPECT_EQ(t[4].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(t[4].shape, (std::vector<int64_t>{768, 2304}));  // Conv1D stores (in, out)
  EXPECT_EQ(t[4].layer, 0);
  EXPECT_EQ(t.back().name, "lm_head.weight");
  EXPECT_EQ(t.back().tied_to, 0);  // tied to wte by GPT2Config's default
  EXPECT_EQ(t.back().layer, 12);
}

TEST(TensorInventory, LlamaGroupedQueryAttentionShapes) {
  const Model model = shipped_model("llama-2-70b");
  const auto& t = model.inventory.tensors;
  auto find = [&](const std::string& name) -> const TensorInfo& {
    for (const TensorInfo& info : t) if (info.name == name) return info;
    ADD_FAILURE() << name << " missing";
    return t.front();
  };
  EXPECT_EQ(find("model.layers.0.self_attn.q_proj.weight").shape, (std::vector<int64_t>{8192, 8192}));
  EXPECT_EQ(find("model.layers.0.self_attn.k_proj.weight").shape, (std::vector<int64_t>{1024, 8192}));
  EXPECT_EQ(find("model.layers.79.mlp.down_proj.weight").shape, (std::vector<int64_t>{8192, 28672}));
  EXPECT_EQ(find("lm_head.weight").tied_to, -1);  // Llama does not tie
}

TEST(TensorInventory, Qwen2HasQkvBiasesButNoOutputBias) {
  const Model model = shipped_model("qwen2-0.5b");
  std::set<std::string> names;
  for (const TensorInfo& info : model.inventory.tensors) names.insert(info.name);
  EXPECT_TRUE(names.count("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_TRUE(names.count("model.layers.0.self_attn.v_proj.bias"));
  EXPECT_FALSE(names.count("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_TRUE(model.config.tie_word_embeddings);
}

TEST(TensorInventory, OptKeepsTwoExtraPositionRows) {
  const Model model = shipped_model("opt-1.3b");
  EXPECT_EQ(model.inventory.tensors[1].name, "model.decoder.embed_positions.weight");
  EXPECT_EQ(model.inventory.tensors[1].shape, (std::vector<int64_t>{2050, 2048}));
}

TEST(TensorInventory, GptNeoxReadsParallelResidualAndRotary) {
  const Model model = shipped_model("gpt-neox-20b");
  EXPECT_TRUE(model.config.parallel_residual);
  EXPECT_DOUBLE_EQ(model.config.rotary_pct, 0.25);
  EXPECT_EQ(model.inventory.tensors.back().name, "embed_out.weight");
  EXPECT_EQ(model.inventory.tensors.back().tied_to, -1);
}

TEST(TensorInventory, PerLayerTotalsAddUpToTheCount) {
  for (const std::string& name : shipped_model_names()) {
    const Model model = shipped_model(name);
    EXPECT_EQ(testing::whole_model_totals(model).full(), model.parameter_count) << name;
  }
}

TEST(TensorInventory, TensorParallelSplitsMatricesNotNorms) {
  const Model model = shipped_model("gpt2");
  const ParamTotals& block = model.blocks[0];
  // 12h² + 13h per GPT-2 block: norms (4h) and row-parallel biases (2h) stay whole.
  EXPECT_EQ(block.replicated, 6 * 768);
  EXPECT_EQ(block.split, 12 * 768 * 768 + 7 * 768);
  // Vocab-parallel rows pad up to a multiple of tp: 50257 -> 50260 for tp = 4.
  EXPECT_EQ(model.embedding.per_tp_rank(4), 1024 * 768 + 12565 * 768);
}

}  // namespace
}  // namespace tessera::planner
