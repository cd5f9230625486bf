// Activation recomputation on the GPU step (cuda/gpt_training.h): one step of
// the small GPT-2 and Qwen2 (small_models.h: vocabulary 97, 2 layers, B = 2,
// T = 37) under --recompute selective and full against the same step
// without recompute, from the same weights and tokens, and the device
// ledger's activation peak against the host layout
// (model/activation_buffers.h; every buffer under 1 MiB, so each is booked
// rounded up to 512 bytes). Skipped without a CUDA device; run by
// tools/gpu-check.
//
// Tolerances. The recompute runs the forward's own launches on the same
// inputs (the attention core, or the whole block), so a deterministic
// library gives the same bits; cuBLASLt and cuDNN's fused attention are
// deterministic for a fixed plan, but nothing promises the same plan twice.
// The bound is one bf16 rounding, 2^-8 relative, for the loss, the gradient
// norm and each parameter's gradient in norm: a recomputed tensor may
// differ by one rounding of its stored bf16 values and no more. The test
// prints how many gradients are the same bits.
// These bounds have not yet met a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "small_models.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/device/caching_allocator.h"
#include "tessera/engine/model/activation_buffers.h"

namespace tessera::engine::cuda::testing {
namespace {

using RecomputeOnGpu = GpuTest;

constexpr int64_t B = 2, T = 37;

struct OneStep {
  GpuStepResult result;
  std::vector<bf16> gradients;
  int64_t activation_peak = 0;
};

OneStep run_step(const planner::Model& model, planner::RecomputeMode mode) {
  const auto tokens = random_tokens(B * T, 97, 1), targets = random_tokens(B * T, 97, 2);
  MemoryLedger ledger;
  auto made = GptTraining::create(model, ledger, B, T, 5, OptimizerOptions{}, GpuDataParallel{}, mode);
  EXPECT_TRUE(made.ok()) << made.error().message;
  if (!made.ok()) return {};
  auto stepped = (*made)->step(tokens.data(), targets.data());
  EXPECT_TRUE(stepped.ok()) << stepped.error().message;
  if (!stepped.ok()) return {};
  return OneStep{stepped.value(), (*made)->gradients(), ledger.peak(MemoryCategory::activations, MemorySpace::device)};
}

double relative(double got, double want) { return std::abs(got - want) / std::max(std::abs(want), 1e-30); }

void expect_within(const std::string& what, double error, double tolerance) {
  ::testing::Test::RecordProperty("max_error " + what, std::to_string(error));
  std::printf("  %-52s relative error %.3g (tolerance %.3g)\n", what.c_str(), error, tolerance);
  EXPECT_LE(error, tolerance) << what;
}

void check_recompute(const planner::Model& model, const std::string& family) {
  const double tolerance = std::ldexp(1.0, -8);
  const OneStep base = run_step(model, planner::RecomputeMode::none);
  const planner::ActivationTable table = planner::activation_table(model.config, planner::ActivationProfile::tessera_gpu, planner::Precision::bf16);
  const int64_t L = model.config.num_layers;
  const auto booked = [&](planner::RecomputeMode mode) {
    return activation_buffers(table, planner::ActivationShape{B, T, 1, false}, mode).bytes(MemoryCategory::activations, L, CachingAllocator::kBlockAlign);
  };
  EXPECT_EQ(base.activation_peak, booked(planner::RecomputeMode::none)) << family;
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  for (planner::RecomputeMode mode : {planner::RecomputeMode::selective, planner::RecomputeMode::full}) {
    const std::string what = family + " recompute " + std::string(enum_name(mode));
    const OneStep step = run_step(model, mode);
    ASSERT_EQ(step.gradients.size(), base.gradients.size()) << what;
    expect_within(what + " loss", relative(step.result.loss, base.result.loss), tolerance);
    expect_within(what + " gradient norm", relative(step.result.grad_norm, base.result.grad_norm), tolerance);
    double worst = 0;
    int64_t same_bits = 0;
    for (const planner::FlatParameter& flat : order) {
      double difference = 0, reference = 0;
      for (int64_t i = flat.offset; i < flat.offset + flat.numel; ++i) {
        const double want = static_cast<double>(widen(base.gradients[static_cast<size_t>(i)]));
        const double got = static_cast<double>(widen(step.gradients[static_cast<size_t>(i)]));
        difference += (got - want) * (got - want);
        reference += want * want;
        same_bits += step.gradients[static_cast<size_t>(i)].bits == base.gradients[static_cast<size_t>(i)].bits;
      }
      worst = std::max(worst, std::sqrt(difference) / std::max(std::sqrt(reference), 1e-30));
    }
    expect_within(what + " worst parameter gradient", worst, tolerance);
    ::testing::Test::RecordProperty("differing " + what + " gradients", std::to_string(static_cast<int64_t>(base.gradients.size()) - same_bits));
    std::printf("  %-52s %lld of %zu gradients the same bits\n", what.c_str(), static_cast<long long>(same_bits), base.gradients.size());
    // The peak is what the layout books, and lower than without recompute.
    EXPECT_EQ(step.activation_peak, booked(mode)) << what;
    EXPECT_LT(step.activation_peak, base.activation_peak) << what;
    ::testing::Test::RecordProperty("activation_peak " + what, std::to_string(step.activation_peak));
  }
}

TEST_F(RecomputeOnGpu, SameLossAndGradientsWithALowerActivationPeak) {
  check_recompute(small_model(kSmallGpt2), "gpt2");
  check_recompute(small_model(kSmallQwen2), "qwen2");
}

// torchtitan's op-level policy is the planner's only: refused in one line, nothing booked.
TEST(RecomputeRefusals, OpSelectiveIsOneLine) {
  MemoryLedger ledger;
  auto refused = GptTraining::create(small_model(kSmallGpt2), ledger, B, T, 5, OptimizerOptions{}, GpuDataParallel{}, planner::RecomputeMode::op_selective);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "--recompute op_selective: the GPU training step recomputes none, selective or full");
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 0);
}

}  // namespace
}  // namespace tessera::engine::cuda::testing
