// --transformers-version (transformers_version.h): the releases accepted, what
// each keeps, and the hf profiles' bytes for a small Llama and GPT-2 at
// transformers 4.32 and 5.17, worked by hand.
#include <gtest/gtest.h>

#include <string>

#include "tessera/planner/activations.h"
#include "tessera/planner/eager_elementwise.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/model_config.h"
#include "tessera/planner/transformers_version.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

constexpr TransformersVersion k432{4, 32}, k517{5, 17};

ModelConfig small(const std::string& family) {
  const std::string text = family == "gpt2"
                               ? R"({"model_type": "gpt2", "vocab_size": 1000, "n_positions": 64, "n_embd": 64, "n_layer": 2, "n_head": 4})"
                               : R"({"model_type": "llama", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                    "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 64, "tie_word_embeddings": false})";
  return parse_model_config(text, family).value();
}

// Two sequences of 16 tokens: 32 tokens, 1000 logits each.
constexpr ActivationShape kShape{2, 16, 1, false};
constexpr int64_t kLogits = 2 * 16 * 1000;

TEST(TransformersVersion, ParsesMinorReleasesAndDropsThePatch) {
  EXPECT_EQ(parse_transformers_version("4.32"), k432);
  EXPECT_EQ(parse_transformers_version("4.32.1"), k432);
  EXPECT_EQ(parse_transformers_version("5.17.0"), k517);
  for (const char* bad : {"", "5", "4.", "4.x", "4.32.", "4.32.1.2", "4,32", " 4.32"}) EXPECT_FALSE(parse_transformers_version(bad)) << bad;
  EXPECT_EQ(to_string(TransformersVersion{4, 3}), "4.3");
  EXPECT_EQ(kMeasuredTransformers, k517);
}

TEST(TransformersVersion, AcceptsOnlyTheReleasesReadFromSource) {
  for (TransformersVersion v : {TransformersVersion{4, 31}, k432, TransformersVersion{4, 33}, TransformersVersion{5, 0}, k517}) {
    EXPECT_FALSE(unsupported_transformers_version(v, ModelFamily::llama)) << to_string(v);
    EXPECT_FALSE(unsupported_transformers_version(v, ModelFamily::gpt2)) << to_string(v);
  }
  const auto between = unsupported_transformers_version({4, 40}, ModelFamily::llama);
  ASSERT_TRUE(between);
  EXPECT_EQ(*between, "--transformers-version 4.40: the hf profiles model llama on transformers 4.31-4.33 or 5.0-5.17 (read from its source); use one of those");
  EXPECT_TRUE(unsupported_transformers_version({4, 30}, ModelFamily::gpt2));
  EXPECT_TRUE(unsupported_transformers_version({5, 18}, ModelFamily::llama));
  // Mistral and Qwen2 only where their modules are Llama's.
  const auto mistral = unsupported_transformers_version(k432, ModelFamily::mistral);
  ASSERT_TRUE(mistral);
  EXPECT_NE(mistral->find("mistral on transformers 5.0-5.17 ("), std::string::npos) << *mistral;
  EXPECT_FALSE(unsupported_transformers_version({5, 3}, ModelFamily::qwen2));
}

TEST(TransformersVersion, WhatEachReleaseKeeps) {
  const TransformersBehaviour llama_432 = transformers_behaviour(k432, ModelFamily::llama, false);
  EXPECT_TRUE(llama_432.returns_fp32_logits && llama_432.loss_in_fp32 && llama_432.builds_causal_mask);
  const TransformersBehaviour gpt2_432 = transformers_behaviour(k432, ModelFamily::gpt2, true);
  EXPECT_FALSE(gpt2_432.returns_fp32_logits || gpt2_432.loss_in_fp32 || gpt2_432.builds_causal_mask);
  for (ModelFamily family : {ModelFamily::llama, ModelFamily::gpt2}) {
    const TransformersBehaviour sdpa = transformers_behaviour(k517, family, false), eager = transformers_behaviour(k517, family, true);
    EXPECT_FALSE(sdpa.returns_fp32_logits || sdpa.builds_causal_mask);
    EXPECT_TRUE(sdpa.loss_in_fp32 && eager.loss_in_fp32 && eager.builds_causal_mask);
  }
}

// The loss's peak per micro-batch: the logits the loop holds plus log_softmax's
// output, nll_loss's gradient and log_softmax's gradient.
TEST(TransformersVersion, LogitsAndLossBytesByHand) {
  const ModelConfig llama = small("llama"), gpt2 = small("gpt2");
  const auto logits = [](const ModelConfig& c, ActivationProfile p, TransformersVersion v) {
    return terms_bytes(activation_table(c, p, Precision::bf16, v).logits, kShape);
  };
  // Llama 4.32: fp32 logits held and an fp32 loss, 4 + 3 × 4 bytes a logit; 5.17: bf16 logits, 2 + 3 × 4.
  EXPECT_EQ(logits(llama, ActivationProfile::hf, k432), kLogits * 16);
  EXPECT_EQ(logits(llama, ActivationProfile::hf, k517), kLogits * 14);
  // GPT-2 4.32: the loss on the bf16 logits, 4 × 2; 5.17 as Llama.
  EXPECT_EQ(logits(gpt2, ActivationProfile::hf_eager, k432), kLogits * 8);
  EXPECT_EQ(logits(gpt2, ActivationProfile::hf_eager, k517), kLogits * 14);
  // Under autocast the Trainer keeps no logits and the loss is fp32 at either release: 3 × 4.
  EXPECT_EQ(logits(gpt2, ActivationProfile::hf_autocast, k432), kLogits * 12);
  EXPECT_EQ(logits(llama, ActivationProfile::hf_autocast, k432), kLogits * 12);
}

// The [b, 1, s, s] mask, kept once per micro-batch under full recompute only:
// 2 × 16 × 16 elements, in bf16 (the embeddings' dtype), fp32 under autocast.
TEST(TransformersVersion, AttentionMaskBytesByHand) {
  const ModelConfig llama = small("llama"), gpt2 = small("gpt2");
  const auto shared = [](const ModelConfig& c, ActivationProfile p, TransformersVersion v, RecomputeMode mode) {
    return block_activation_bytes(activation_table(c, p, Precision::bf16, v), kShape, mode).shared;
  };
  EXPECT_EQ(shared(llama, ActivationProfile::hf, k432, RecomputeMode::full), 2 * 16 * 16 * 2);
  EXPECT_EQ(shared(llama, ActivationProfile::hf_autocast, k432, RecomputeMode::full), 2 * 16 * 16 * 4);
  EXPECT_EQ(shared(llama, ActivationProfile::hf, k432, RecomputeMode::none), 0);
  EXPECT_EQ(shared(llama, ActivationProfile::hf, k517, RecomputeMode::full), 0);  // SDPA: is_causal, no mask
  EXPECT_EQ(shared(llama, ActivationProfile::hf_eager, k517, RecomputeMode::full), 2 * 16 * 16 * 2);
  EXPECT_EQ(shared(gpt2, ActivationProfile::hf_eager, k432, RecomputeMode::full), 0);  // its causal mask is a buffer
  EXPECT_EQ(shared(gpt2, ActivationProfile::hf_eager, k517, RecomputeMode::full), 2 * 16 * 16 * 2);
}

// The estimate of a one-GPU run moves by exactly those bytes: the logits
// category by the held logits' extra 2 bytes, the activations by the mask.
TEST(TransformersVersion, EstimateMovesByTheLogitsAndTheMask) {
  const Model model = make_model(small("llama"));
  EstimateRequest r;
  r.training.activation_profile = ActivationProfile::hf;
  r.training.recompute = RecomputeMode::full;
  r.training.micro_batch_size = 2;
  r.training.seq_len = 16;
  const GpuProfile gpu = testing::shipped_gpu("h100-80g");
  const MemoryEstimate today = testing::estimate_or_fail(model, gpu, r);
  r.training.transformers_version = k432;
  const MemoryEstimate then = testing::estimate_or_fail(model, gpu, r);
  const auto category = [](const MemoryEstimate& e, MemoryCategory c) { return e.ranks.front().bytes[c].device; };
  EXPECT_EQ(category(then, MemoryCategory::logits) - category(today, MemoryCategory::logits), kLogits * 2);
  EXPECT_EQ(category(then, MemoryCategory::activations) - category(today, MemoryCategory::activations), 2 * 16 * 16 * 2);
}

// The loss's traffic per token, op by op (eager_elementwise.h), 1000 logits.
// 5.17: the bf16 logits cast up (2 + 4), log_softmax (4 + 4); backward nll_loss's
// gradient (4), log_softmax's (3 × 4), the cast's (4 + 2): 14 and 22 bytes a
// logit. 4.32's Llama adds the fp32 shift copy (4 + 4) and its slice's gradient
// (zero fill 4, copy 4 + 4); GPT-2's loss runs on the bf16 logits, copy included:
// 2 × 2 + 2 × 2 forward, 2 + 3 × 2 + 3 × 2 backward.
TEST(TransformersVersion, LossTrafficByHand) {
  const ModelConfig llama = small("llama"), gpt2 = small("gpt2");
  const auto last = [](const OutsideBlocksBytes& b) { return b.last_stage; };
  const ElementwiseBytes llama_517 = last(hf_llama_eager_outside_bytes(llama, ActivationProfile::hf, Precision::bf16, 1, k517));
  const ElementwiseBytes llama_432 = last(hf_llama_eager_outside_bytes(llama, ActivationProfile::hf, Precision::bf16, 1, k432));
  EXPECT_DOUBLE_EQ(llama_432.forward - llama_517.forward, 1000 * 8.0);
  EXPECT_DOUBLE_EQ(llama_432.backward - llama_517.backward, 1000 * 12.0);
  const ElementwiseBytes gpt2_517 = last(hf_gpt2_eager_outside_bytes(gpt2, ActivationProfile::hf_eager, Precision::bf16, 1, k517));
  const ElementwiseBytes gpt2_432 = last(hf_gpt2_eager_outside_bytes(gpt2, ActivationProfile::hf_eager, Precision::bf16, 1, k432));
  EXPECT_DOUBLE_EQ(gpt2_517.forward - gpt2_432.forward, 1000 * (14.0 - 8.0));
  EXPECT_DOUBLE_EQ(gpt2_517.backward - gpt2_432.backward, 1000 * (22.0 - 14.0));
}

TEST(TransformersVersion, ARequestOutsideTheReleasesIsRefused) {
  EstimateRequest r;
  r.training.activation_profile = ActivationProfile::hf;
  r.training.transformers_version = {4, 40};
  const auto estimate = estimate_memory(make_model(small("llama")), testing::shipped_gpu("h100-80g"), r);
  ASSERT_FALSE(estimate.ok());
  EXPECT_NE(estimate.error().message.find("--transformers-version 4.40"), std::string::npos);
  // The other profiles ignore it.
  r.training.activation_profile = ActivationProfile::flash;
  EXPECT_TRUE(estimate_memory(make_model(small("llama")), testing::shipped_gpu("h100-80g"), r).ok());
}

}  // namespace
}  // namespace tessera::planner
