#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "../support/scratch_dir.h"
#include "tessera/engine/data.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/trainer.h"
#include "tessera/planner/registry.h"

namespace tessera::engine {
namespace {

const std::string kText = std::string(TESSERA_SOURCE_DIR) + "/data/text/kjv-genesis-exodus.txt";

// Trains `steps` steps of `micro_batches` micro-batches of `micro_batch` samples; returns the parameters.
std::vector<std::vector<float>> train_parameters(int64_t micro_batch, int64_t micro_batches, int steps) {
  const planner::Model model = planner::load_model("tiny-gpt2").value();
  const TokenDataset data = load_token_file(kText).value();
  MemoryLedger ledger;
  Transformer<float> net = Transformer<float>::create(model, ledger, micro_batch, 32, 5).value();
  // SGD: the update is linear in the gradient, so the two runs must agree to
  // rounding (Adam divides by sqrt(v) and would magnify rounding of near-zero gradients).
  OptimizerOptions options;
  options.kind = planner::OptimizerKind::sgd_momentum;
  options.learning_rate = 0.1;
  auto optimizer = Optimizer<float>::whole(ledger, net.flat_parameters().data(), net.flat_order(), std::vector<bool>(net.parameters().size(), true), options);
  DataLoader loader(data, micro_batch, 32);
  std::vector<int32_t> tokens(static_cast<size_t>(micro_batch * 32)), targets(tokens.size());
  for (int step = 0; step < steps; ++step) {
    net.zero_gradients();
    for (int64_t m = 0; m < micro_batches; ++m) {
      loader.next(tokens.data(), targets.data());
      net.forward(tokens.data(), targets.data());
      net.backward(1.0f / static_cast<float>(micro_batches));
    }
    optimizer.step(net.flat_gradients().data());
  }
  std::vector<std::vector<float>> out;
  for (auto& p : net.parameters()) out.emplace_back(p.data(), p.data() + p.numel());
  return out;
}

TEST(Trainer, FourMicroBatchesOfTwoEqualOneBatchOfEight) {
  const auto accumulated = train_parameters(2, 4, 3);
  const auto whole = train_parameters(8, 1, 3);
  ASSERT_EQ(accumulated.size(), whole.size());
  // Relative error per tensor, ||a - b|| / ||b||: summation order differs between the runs.
  double worst = 0;
  for (size_t p = 0; p < whole.size(); ++p) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < whole[p].size(); ++i) {
      diff += std::pow(static_cast<double>(accumulated[p][i]) - whole[p][i], 2);
      norm += std::pow(static_cast<double>(whole[p][i]), 2);
    }
    worst = std::max(worst, std::sqrt(diff / norm));
  }
  EXPECT_LT(worst, 1e-6);
}

TEST(Trainer, LossFallsOnTheShippedText) {
  TrainOptions options;
  options.data_path = kText;
  options.micro_batch_size = 8;
  options.seq_len = 64;
  options.steps = 150;
  options.optimizer.learning_rate = 3e-3;
  std::ostringstream log;
  auto metrics = train(planner::load_model("tiny-gpt2").value(), options, log, false);
  ASSERT_TRUE(metrics.ok()) << metrics.error().message;
  EXPECT_NEAR(metrics->loss.front(), std::log(256.0), 0.3);
  // Byte-level English after 150 steps of 512 tokens: below 2.6 nats per byte (measured about 2.4).
  EXPECT_LT(metrics->loss.back(), 2.6) << log.str();
  EXPECT_NE(log.str().find("step 150/150"), std::string::npos);
}

TEST(Trainer, LlmcShardsAreRead) {
  const tessera::testing::ScratchDir scratch;
  const std::string path = scratch.path("shard.bin");
  {
    std::ofstream out(path, std::ios::binary);
    int32_t header[256] = {20240520, 1, 3};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    const uint16_t tokens[3] = {7, 50256, 9};
    out.write(reinterpret_cast<const char*>(tokens), sizeof tokens);
  }
  auto data = load_token_file(path);
  ASSERT_TRUE(data.ok()) << data.error().message;
  EXPECT_EQ(data->tokens, (std::vector<int32_t>{7, 50256, 9}));
  EXPECT_EQ(data->vocab_size, 50257) << "a GPT-2 shard fits GPT-2's vocabulary";
  std::ofstream(path, std::ios::binary) << "not a shard";
  EXPECT_FALSE(load_token_file(path).ok());
}

}  // namespace
}  // namespace tessera::engine
