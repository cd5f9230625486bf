// Mixed-precision training: bf16 follows fp32, and fp16's dynamic loss scaler
// skips overflowing steps, halves the scale and carries on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "tessera/engine/loss_scaler.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/trainer.h"
#include "tessera/planner/registry.h"

namespace tessera::engine {
namespace {

const std::string kText = std::string(TESSERA_SOURCE_DIR) + "/data/text/kjv-genesis-exodus.txt";

std::vector<uint16_t> parameter_bits(const std::vector<Slice<fp16>>& params) {
  std::vector<uint16_t> bits;
  for (const auto& p : params) {
    for (int64_t i = 0; i < p.numel(); ++i) bits.push_back(p.data()[i].bits);
  }
  return bits;
}

TEST(MixedPrecision, InjectedFp16OverflowSkipsTheStepAndHalvesTheScale) {
  const planner::Model model = planner::load_model("tiny-gpt2").value();
  MemoryLedger ledger;
  Transformer<fp16> net = Transformer<fp16>::create(model, ledger, 2, 16, 1).value();
  auto optimizer = Optimizer<fp16>::whole(ledger, net.flat_parameters().data(), net.flat_order(), std::vector<bool>(net.parameters().size(), true), OptimizerOptions{});
  DynamicLossScaler scaler;  // 65536, backs off at the first overflow
  std::vector<int32_t> tokens(32), targets(32);
  for (int i = 0; i < 32; ++i) {
    tokens[static_cast<size_t>(i)] = 'a' + i % 26;
    targets[static_cast<size_t>(i)] = 'a' + (i + 1) % 26;
  }
  const auto before = parameter_bits(net.parameters());

  net.zero_gradients();
  net.forward(tokens.data(), targets.data());
  net.backward(static_cast<float>(scaler.scale()));
  net.gradients()[3].data()[5] = to_fp16(std::numeric_limits<float>::infinity());  // the injected overflow
  const auto skipped = optimizer.step(net.flat_gradients().data(), scaler.scale());
  EXPECT_FALSE(skipped.has_value());
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(parameter_bits(net.parameters()), before) << "a skipped step leaves the weights alone";
  EXPECT_EQ(optimizer.steps_taken(), 0);

  net.zero_gradients();
  net.forward(tokens.data(), targets.data());
  net.backward(static_cast<float>(scaler.scale()));
  const auto stepped = optimizer.step(net.flat_gradients().data(), scaler.scale());
  ASSERT_TRUE(stepped.has_value());
  EXPECT_TRUE(std::isfinite(*stepped));
  EXPECT_TRUE(scaler.update(false));
  EXPECT_NE(parameter_bits(net.parameters()), before);
  EXPECT_EQ(optimizer.steps_taken(), 1);
  // The 16-bit parameters are the fp32 master weights, rounded.
  const float* master = optimizer.full_precision();
  for (int64_t i = 0; i < net.flat_parameters().numel(); ++i) ASSERT_EQ(net.flat_parameters().data()[i].bits, to_fp16(master[i]).bits);
}

TrainOptions run_options(planner::Precision precision, int64_t steps) {
  TrainOptions o;
  o.data_path = kText;
  o.micro_batch_size = 8;
  o.seq_len = 64;
  o.steps = steps;
  o.precision = precision;
  o.optimizer.learning_rate = 3e-3;
  return o;
}

TEST(MixedPrecision, Fp16TrainingRecoversFromAScaleThatOverflows) {
  TrainOptions o = run_options(planner::Precision::fp16, 30);
  o.loss_scaler.initial_scale = 1 << 20;  // dlogits · 2^20 overflow fp16 in the head's backward
  std::ostringstream log;
  auto metrics = train(planner::load_model("tiny-gpt2").value(), o, log, false);
  ASSERT_TRUE(metrics.ok()) << metrics.error().message;
  ASSERT_FALSE(metrics->skipped_steps.empty());
  EXPECT_EQ(metrics->skipped_steps.front(), 1);
  for (int64_t step : metrics->skipped_steps) {
    const auto i = static_cast<size_t>(step - 1);
    EXPECT_TRUE(std::isnan(metrics->grad_norm[i]));
    if (i + 1 < metrics->loss_scale.size()) {
      EXPECT_EQ(metrics->loss_scale[i + 1], metrics->loss_scale[i] / 2) << "step " << step;
    }
  }
  EXPECT_NE(log.str().find("step 1: gradients overflowed at loss scale 1.04858e+06; step skipped, loss scale now 524288"), std::string::npos) << log.str();
  EXPECT_LT(metrics->skipped_steps.size(), 15u);
  EXPECT_LT(metrics->loss.back(), metrics->loss.front() - 1.5) << "training goes on";
}

TEST(MixedPrecision, Bf16FollowsFp32OnTheShippedText) {
  const planner::Model model = planner::load_model("tiny-gpt2").value();
  std::ostringstream log;
  auto fp32 = train(model, run_options(planner::Precision::fp32, 60), log, false);
  auto bf16_run = train(model, run_options(planner::Precision::bf16, 60), log, false);
  ASSERT_TRUE(fp32.ok() && bf16_run.ok());
  EXPECT_NEAR(bf16_run->loss.front(), fp32->loss.front(), 0.01);
  EXPECT_NEAR(bf16_run->loss.back(), fp32->loss.back(), 0.1);
  EXPECT_LT(bf16_run->loss.back(), 3.0);
  EXPECT_TRUE(bf16_run->skipped_steps.empty());
}

}  // namespace
}  // namespace tessera::engine
