#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gradcheck.h"
#include "tessera/engine/comm/dry_run.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/cpu_backend.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"

namespace tessera::engine {
namespace {

planner::Model tiny(const std::string& json) {
  auto config = planner::parse_model_config(json, "tiny");
  EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error().message);
  planner::ModelConfig c = config.value();
  c.name = "tiny";
  return planner::make_model(c);
}

const char* kTinyGpt2 = R"({"model_type":"gpt2","vocab_size":11,"n_embd":8,"n_layer":2,"n_head":2,"n_positions":8})";
// Grouped-query attention (4 heads, 2 K/V heads), Qwen2's q/k/v biases, SwiGLU, RoPE, untied head.
const char* kTinyQwen2 = R"({"model_type":"qwen2","vocab_size":13,"hidden_size":8,"num_hidden_layers":2,"num_attention_heads":4,
                            "num_key_value_heads":2,"intermediate_size":12})";

std::vector<int32_t> random_tokens(size_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> out(n);
  for (auto& t : out) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return out;
}

// Whole-model gradients against finite differences, in double; `samples`
// elements per tensor (0: all of them).
void check_model_gradients(const planner::Model& model, size_t samples = 0) {
  MemoryLedger ledger;
  const int64_t B = 2, T = 5;
  auto created = Transformer<double>::create(model, ledger, B, T, 7);
  ASSERT_TRUE(created.ok()) << created.error().message;
  Transformer<double> net = std::move(created).value();
  const auto tokens = random_tokens(B * T, static_cast<int32_t>(model.config.vocab_size), 1);
  const auto targets = random_tokens(B * T, static_cast<int32_t>(model.config.vocab_size), 2);
  net.zero_gradients();
  net.forward(tokens.data(), targets.data());
  net.backward(1.0);
  for (size_t p = 0; p < net.parameters().size(); ++p) {
    auto& param = net.parameters()[p];
    std::vector<double> values(param.data(), param.data() + param.numel());
    const std::vector<double> analytic(net.gradients()[p].data(), net.gradients()[p].data() + param.numel());
    auto loss = [&] {
      std::copy(values.begin(), values.end(), param.data());
      return net.forward(tokens.data(), targets.data());
    };
    testing::expect_gradient(net.parameter_names()[p], values, analytic, loss, 1e-5, samples);
    std::copy(values.begin(), values.end(), param.data());
  }
}

TEST(Transformer, Gpt2GradientsMatchFiniteDifferences) { check_model_gradients(tiny(kTinyGpt2)); }

TEST(Transformer, LlamaLayoutGradientsMatchFiniteDifferences) { check_model_gradients(tiny(kTinyQwen2)); }

// The size the engine issue names: 2 layers, 64 hidden (24 elements checked per tensor).
TEST(Transformer, Gpt2With64HiddenGradientsMatchFiniteDifferences) {
  check_model_gradients(tiny(R"({"model_type":"gpt2","vocab_size":32,"n_embd":64,"n_layer":2,"n_head":4,"n_positions":8})"), 24);
}

TEST(Transformer, ParametersFollowTheInventory) {
  const planner::Model model = planner::load_model("tiny-gpt2").value();
  EXPECT_EQ(model.parameter_count, 437'760);
  MemoryLedger ledger;
  auto created = Transformer<float>::create(model, ledger, 1, 8, 1);
  ASSERT_TRUE(created.ok());
  Transformer<float> net = std::move(created).value();
  int64_t count = 0;
  for (auto& p : net.parameters()) count += p.numel();
  EXPECT_EQ(count, model.parameter_count) << "a tied head is stored once";
  EXPECT_EQ(net.parameter_names().front(), "transformer.wte.weight");
  EXPECT_EQ(ledger.current(MemoryCategory::parameters, MemorySpace::device), 4 * model.parameter_count);
}

// Every recompute mode, and full recompute of the first of the tiny models' two blocks (--recompute-num-layers 1).
const planner::BlockRecompute kRecomputes[] = {planner::RecomputeMode::none, planner::RecomputeMode::selective, planner::RecomputeMode::full,
                                               {planner::RecomputeMode::full, 1}};

// The ledger's bytes per category equal the planner's estimate for the same
// set-up (one rank, tessera profile, the CPU backend's workspace), in fp32 and
// in mixed precision, for every recompute mode: the promise that makes plans testable.
template <typename T>
void expect_ledger_matches_planner(planner::Precision precision) {
  for (const char* json : {kTinyGpt2, kTinyQwen2})
  for (planner::BlockRecompute mode : kRecomputes) {
    const planner::Model model = tiny(json);
    MemoryLedger ledger;
    const int64_t B = 3, T_len = 6;
    auto created = Transformer<T>::create(model, ledger, B, T_len, 1, mode);
    ASSERT_TRUE(created.ok());
    Transformer<T> net = std::move(created).value();
    auto optimizer = Optimizer<T>::whole(ledger, net.flat_parameters().data(), net.flat_order(), std::vector<bool>(net.parameters().size(), true), OptimizerOptions{});
    planner::EstimateRequest request;
    request.training.activation_profile = planner::ActivationProfile::tessera;  // what the engine keeps
    request.training.recompute = mode.mode;
    request.training.recompute_num_layers = mode.num_layers;
    request.training.precision = precision;
    request.training.optimizer = planner::OptimizerKind::adamw;
    request.training.micro_batch_size = B;
    request.training.seq_len = T_len;
    request.assumptions.cublas_workspace_bytes = planner::cpu_workspace_bytes(cpu::backend_threads(), T_len, model.config.head_dim, precision);
    request.assumptions.nccl_bytes_per_group = 0;
    const planner::GpuProfile gpu = planner::load_gpu("h100-80g").value();
    const planner::MemoryEstimate estimate = planner::estimate_memory(model, gpu, request).value();
    const auto& row = estimate.ranks.at(0);
    for (MemoryCategory c : {MemoryCategory::parameters, MemoryCategory::master_weights, MemoryCategory::gradients, MemoryCategory::optimizer_states,
                             MemoryCategory::activations, MemoryCategory::logits, MemoryCategory::workspace}) {
      EXPECT_EQ(ledger.current(c, MemorySpace::device), row.bytes[c].device) << to_string(c) << " of " << model.config.model_type << " in "
                                                                     << enum_name(precision) << ", recompute " << enum_name(mode.mode) << " " << mode.num_layers;
    }
  }
}

TEST(Transformer, LedgerMatchesThePlannerEstimateInFp32) { expect_ledger_matches_planner<float>(planner::Precision::fp32); }
TEST(Transformer, LedgerMatchesThePlannerEstimateInBf16) { expect_ledger_matches_planner<bf16>(planner::Precision::bf16); }
TEST(Transformer, LedgerMatchesThePlannerEstimateInFp16) { expect_ledger_matches_planner<fp16>(planner::Precision::fp16); }

// Recompute changes memory, never the numbers: gradients are bit-identical.
TEST(Transformer, RecomputeModesGiveIdenticalGradients) {
  for (const char* json : {kTinyGpt2, kTinyQwen2}) {
    const planner::Model model = tiny(json);
    const auto tokens = random_tokens(10, static_cast<int32_t>(model.config.vocab_size), 3);
    const auto targets = random_tokens(10, static_cast<int32_t>(model.config.vocab_size), 4);
    std::vector<std::vector<float>> reference;
    for (planner::BlockRecompute mode : kRecomputes) {
      MemoryLedger ledger;
      Transformer<float> net = Transformer<float>::create(model, ledger, 2, 5, 9, mode).value();
      net.zero_gradients();
      net.forward(tokens.data(), targets.data());
      net.backward(1.0f);
      std::vector<std::vector<float>> grads;
      for (auto& g : net.gradients()) grads.emplace_back(g.data(), g.data() + g.numel());
      if (reference.empty()) {
        reference = grads;
      } else {
        EXPECT_EQ(grads, reference) << model.config.model_type << " recompute " << enum_name(mode.mode) << " " << mode.num_layers;
      }
    }
  }
}

TEST(Transformer, LossStartsNearLogVocab) {
  const planner::Model model = tiny(kTinyGpt2);
  MemoryLedger ledger;
  auto created = Transformer<float>::create(model, ledger, 2, 8, 3);
  ASSERT_TRUE(created.ok());
  Transformer<float> net = std::move(created).value();
  const auto tokens = random_tokens(16, 11, 4), targets = random_tokens(16, 11, 5);
  EXPECT_NEAR(net.forward(tokens.data(), targets.data()), std::log(11.0), 0.1);
}

TEST(Transformer, RefusesFamiliesItDoesNotTrain) {
  MemoryLedger ledger;
  auto net = Transformer<float>::create(planner::load_model("opt-1.3b").value(), ledger, 1, 8, 1);
  ASSERT_FALSE(net.ok());
  EXPECT_NE(net.error().message.find("gpt2 and llama-style"), std::string::npos);
}

// Under sequence parallelism beside context parallelism each tp rank keeps
// an equal share of its cp rank's tokens (B · seq/cp of them, here 1 · 3
// over 2 ranks: refused in one line naming the whole --seq); dry-run groups only say their size.
TEST(Transformer, SequenceParallelismSplitsTheContextRanksTokens) {
  MemoryLedger ledger;
  const auto two = comm::make_dry_run_communicator(0, 2);
  auto odd = Transformer<float>::create(tiny(kTinyGpt2), ledger, 1, 3, 1, planner::RecomputeMode::none, FlatStorage{}, two.get(), true, {}, two.get());
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().message, "--seq 6: sequence parallelism gives each of the 2 tensor-parallel ranks an equal share of the micro-batch's 3 tokens on "
                                 "each of the 2 context-parallel ranks; choose a --seq that --tp × --cp divides");
  auto alone = Transformer<float>::create(tiny(kTinyGpt2), ledger, 1, 3, 1, planner::RecomputeMode::none, FlatStorage{}, two.get(), true);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.error().message,
            "--seq 3: sequence parallelism gives each of the 2 tensor-parallel ranks an equal share of the micro-batch's 3 tokens; choose a --seq that --tp divides");
}

}  // namespace
}  // namespace tessera::engine
