// One full training step of a small GPT-2 and a small Qwen2 on the GPU (cuda/gpt_training.h),
// of one micro-batch and of two accumulated ones,
// against the CPU model (model/transformer.h) in the same precision, bf16
// with fp32 master weights, from the same initial weights and tokens: the
// loss, the gradient norm and each parameter's gradient, then the updated
// weights against the CPU optimizer applied to the GPU's gradients. Awkward
// sizes: a 97-token vocabulary, 37 tokens per sequence, an MLP of 200. Skipped without a
// CUDA device; run by tools/gpu-check.
//
// Tolerances. Both paths store every activation and gradient in bf16 and
// compute in fp32, but round at different points (the GPU keeps bf16 logits
// where the CPU keeps fp32 ones, cuDNN rounds the attention probabilities to
// bf16, sums run in other orders): each stored tensor may differ by one bf16
// rounding, 2^-8 relative, and a difference entering the next layer carries
// through it. The loss (a mean of log-softmaxes, each moving by at most twice
// the largest change of a logit) and the gradient norm (a sum over every
// gradient) are held to 2^-6 relative, four roundings; each parameter's
// gradient as a whole, ‖g_gpu − g_cpu‖ / ‖g_cpu‖, to 2^-4: its elements sum
// N = 74 tokens' terms whose own roundings differ. The update itself is the
// AdamW kernel's, held to the CPU optimizer run on the GPU's gradients within
// one bf16 unit of each weight (below).
// These bounds have not yet met a GPU: the first run will say how far under
// them the two paths are.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../kernels/kernel_check.h"
#include "device_buffer.h"
#include "small_models.h"
#include "tessera/engine/comm/dry_run.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/registry.h"

namespace tessera::engine::cuda::testing {
namespace {


using GptTrainingOnGpu = GpuTest;

planner::Model small_gpt2() { return small_model(kSmallGpt2); }

double norm(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v * v;
  return std::sqrt(sum);
}

void expect_relative(const std::string& what, double got, double want, double tolerance) {
  const double error = std::abs(got - want) / std::max(std::abs(want), 1e-30);
  ::testing::Test::RecordProperty("max_error " + what, std::to_string(error));
  std::printf("  %-48s relative error %.3g (tolerance %.3g)\n", what.c_str(), error, tolerance);
  EXPECT_LE(error, tolerance) << what << ": " << got << " against " << want;
}

// One step of `micro_batches` accumulated micro-batches of (B, T); `what`
// starts the name of each measured error.
void check_one_step(const planner::Model& model, int64_t micro_batches, const std::string& what) {
  const int64_t B = 2, T = 37, micro_tokens = B * T;
  const uint64_t seed = 5;
  const auto tokens = random_tokens(micro_batches * micro_tokens, 97, 1), targets = random_tokens(micro_batches * micro_tokens, 97, 2);
  OptimizerOptions options;  // AdamW, clipping to 1.0 as the trainer does

  // The CPU model, micro-batch after micro-batch as the CPU trainer runs them
  // (gradient_accumulation.h): forward, backward into the same gradients.
  MemoryLedger cpu_ledger;
  auto created = Transformer<bf16>::create(model, cpu_ledger, B, T, seed);
  ASSERT_TRUE(created.ok()) << created.error().message;
  Transformer<bf16> cpu = std::move(created).value();
  cpu.zero_gradients();
  double cpu_loss = 0;
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    const int64_t first = micro * micro_tokens;
    cpu_loss = add_micro_batch_loss(cpu_loss, cpu.forward(tokens.data() + first, targets.data() + first), micro_batches);
    cpu.backward(static_cast<float>(micro_batch_gradient_scale(1.0, micro_batches, 1)));
  }
  const int64_t numel = cpu.flat_parameters().numel();
  const std::vector<bf16> cpu_grads(cpu.flat_gradients().data(), cpu.flat_gradients().data() + numel);
  const double cpu_norm = std::sqrt(Optimizer<bf16>::sum_of_squares(cpu_grads.data(), numel, 1.0));

  // The GPU step.
  MemoryLedger gpu_ledger;
  auto made = GptTraining::create(model, gpu_ledger, B, T, seed, options);
  ASSERT_TRUE(made.ok()) << made.error().message;
  GptTraining& gpu = *made.value();
  const std::vector<bf16> initial = gpu.parameters();
  kernels::testing::expect_bits_equal("gpu initial parameters", initial,
                                      std::vector<bf16>(cpu.flat_parameters().data(), cpu.flat_parameters().data() + numel));
  auto stepped = gpu.step(tokens.data(), targets.data(), micro_batches);
  ASSERT_TRUE(stepped.ok()) << stepped.error().message;
  const GpuStepResult result = stepped.value();
  ASSERT_TRUE(result.updated);
  EXPECT_GT(gpu_ledger.peak(MemoryCategory::activations, MemorySpace::device), 0);
  EXPECT_GT(gpu_ledger.peak(MemoryCategory::optimizer_states, MemorySpace::device), 0);

  expect_relative(what + " loss", result.loss, cpu_loss, std::ldexp(1.0, -6));
  expect_relative(what + " gradient norm", result.grad_norm, cpu_norm, std::ldexp(1.0, -6));
  const std::vector<bf16> gpu_grads = gpu.gradients();
  for (size_t p = 0; p < cpu.flat_order().size(); ++p) {
    const planner::FlatParameter& flat = cpu.flat_order()[p];
    std::vector<double> difference, reference;
    for (int64_t i = flat.offset; i < flat.offset + flat.numel; ++i) {
      const double want = static_cast<double>(widen(cpu_grads[static_cast<size_t>(i)]));
      difference.push_back(static_cast<double>(widen(gpu_grads[static_cast<size_t>(i)])) - want);
      reference.push_back(want);
    }
    const double error = norm(difference) / std::max(norm(reference), 1e-30);
    const std::string gradient = what + " gradient " + cpu.parameter_names()[p];
    ::testing::Test::RecordProperty("max_error " + gradient, std::to_string(error));
    std::printf("  %-48s relative error %.3g (tolerance %.3g)\n", gradient.c_str(), error, std::ldexp(1.0, -4));
    EXPECT_LE(error, std::ldexp(1.0, -4)) << gradient;
  }

  // The update: the CPU optimizer on the GPU's gradients, from the same
  // weights. Each bf16 weight is its fp32 master rounded once: within one
  // unit in the last place of itself (2^-7 relative) where the two masters
  // differ in their last fp32 bits. The step moves weights by about lr = 1e-3,
  // far more than that unit for these weights of about 0.02.
  auto optimizer = Optimizer<bf16>::whole(cpu_ledger, cpu.flat_parameters().data(), cpu.flat_order(), decay_mask(cpu.parameter_shapes()), options);
  ASSERT_TRUE(optimizer.apply(gpu_grads.data(), result.grad_norm * result.grad_norm, 1.0).has_value());
  const std::vector<bf16> updated = gpu.parameters();
  double worst = 0;
  int64_t moved = 0;
  for (int64_t i = 0; i < numel; ++i) {
    const double want = static_cast<double>(widen(cpu.flat_parameters().data()[i])), got = static_cast<double>(widen(updated[static_cast<size_t>(i)]));
    worst = std::max(worst, std::abs(got - want) / std::max(std::abs(want), 1e-30));
    moved += updated[static_cast<size_t>(i)].bits != initial[static_cast<size_t>(i)].bits;
  }
  ::testing::Test::RecordProperty("max_error " + what + " updated parameters", std::to_string(worst));
  std::printf("  %-48s relative error %.3g (tolerance %.3g); %lld of %lld moved\n", (what + " updated parameters").c_str(), worst, std::ldexp(1.0, -7),
              static_cast<long long>(moved), static_cast<long long>(numel));
  EXPECT_LE(worst, std::ldexp(1.0, -7));
  EXPECT_GT(moved, numel / 2) << "the step moves most weights";
}

TEST_F(GptTrainingOnGpu, OneStepMatchesTheCpuModel) {
  check_one_step(small_model(kSmallGpt2), 1, "gpu step");
  check_one_step(small_model(kSmallQwen2), 1, "gpu step");
}

// Gradient accumulation: a step of 2 micro-batches against the CPU trainer's
// accumulated step on the same 2 micro-batches, within the same bounds (both
// add the second micro-batch's gradients into the same bf16 buffer, one more
// rounding on each side).
TEST_F(GptTrainingOnGpu, TwoAccumulatedMicroBatchesMatchTheCpuEngine) {
  check_one_step(small_model(kSmallGpt2), 2, "gpu accumulated step");
  check_one_step(small_model(kSmallQwen2), 2, "gpu accumulated step");
}

// A checkpoint's state (save_state, restore_state): a fresh step restored
// from another's state after 2 steps holds its parameters bit for bit, and
// the next step on both (AdamW's step count and moments restored) gives the
// same bits again. The files themselves are the CPU engine's
// (flat_checkpoint.h; tests/engine/checkpoint_test.cpp).
TEST_F(GptTrainingOnGpu, SavedStateRestoresTheSameSteps) {
  const planner::Model model = small_gpt2();
  const int64_t B = 2, T = 37;
  MemoryLedger ledger;
  auto first = GptTraining::create(model, ledger, B, T, 5, OptimizerOptions{});
  auto second = GptTraining::create(model, ledger, B, T, 9, OptimizerOptions{});  // another seed: other initial weights
  ASSERT_TRUE(first.ok() && second.ok());
  for (uint32_t step = 0; step < 2; ++step) {
    const auto tokens = random_tokens(B * T, 97, 10 + step), targets = random_tokens(B * T, 97, 20 + step);
    ASSERT_TRUE((*first)->step(tokens.data(), targets.data()).ok());
  }
  FlatAdamWState state(model);
  ASSERT_TRUE((*first)->save_state(state).ok());
  EXPECT_EQ(state.steps_taken(), 2);
  ASSERT_TRUE((*second)->restore_state(state).ok());
  kernels::testing::expect_bits_equal("restored parameters", (*second)->parameters(), (*first)->parameters());
  const auto tokens = random_tokens(B * T, 97, 30), targets = random_tokens(B * T, 97, 31);
  ASSERT_TRUE((*first)->step(tokens.data(), targets.data()).ok());
  ASSERT_TRUE((*second)->step(tokens.data(), targets.data()).ok());
  kernels::testing::expect_bits_equal("parameters one step after the restore", (*second)->parameters(), (*first)->parameters());
}

TEST(GptTrainingRefusals, OneLineForWhatItDoesNotTrain) {
  MemoryLedger ledger;
  auto refused = GptTraining::create(small_model(R"({"model_type":"gpt2","vocab_size":97,"n_embd":120,"n_layer":2,"n_head":2,"n_positions":64})"),
                                     ledger, 1, 8, 1, OptimizerOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "--gpu: attention head size 60: cuDNN's fused attention needs a multiple of 8 up to 256");
  OptimizerOptions sgd;
  sgd.kind = planner::OptimizerKind::sgd;
  auto refused_sgd = GptTraining::create(small_gpt2(), ledger, 1, 8, 1, sgd);
  ASSERT_FALSE(refused_sgd.ok());
  EXPECT_EQ(refused_sgd.error().message, "--optimizer sgd: the GPU training step uses AdamW only; use --optimizer adamw");
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 0);
}

// Tensor parallelism is hybrid_parallel's, over ranks that each hold whole
// heads: refused in one line, before any device or communication (a dry-run
// group only says its size); accepted, it gets as far as the device.
TEST(GptTrainingRefusals, TensorParallelismIsHybridParallelsWithWholeHeads) {
  MemoryLedger ledger;
  const auto two = comm::make_dry_run_communicator(0, 2), three = comm::make_dry_run_communicator(0, 3);
  auto ddp = GptTraining::create(small_gpt2(), ledger, 1, 8, 1, OptimizerOptions{}, {}, planner::RecomputeMode::none, GpuTensorParallel{two.get()});
  ASSERT_FALSE(ddp.ok());
  EXPECT_EQ(ddp.error().message, "--tp 2: tensor parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
  GpuDataParallel hybrid;
  hybrid.plugin.kind = planner::PluginKind::hybrid_parallel;
  auto split_heads = GptTraining::create(small_gpt2(), ledger, 1, 8, 1, OptimizerOptions{}, hybrid, planner::RecomputeMode::none, GpuTensorParallel{three.get()});
  ASSERT_FALSE(split_heads.ok());
  EXPECT_EQ(split_heads.error().message, "--tp 3: each tensor-parallel rank holds whole attention and key-value heads and an equal share of the MLP; "
                                         "choose a --tp that divides 2, 2 and 512");
  if (!no_device_reason().empty()) {
    auto accepted = GptTraining::create(small_gpt2(), ledger, 1, 8, 1, OptimizerOptions{}, hybrid, planner::RecomputeMode::none, GpuTensorParallel{two.get()});
    ASSERT_FALSE(accepted.ok());
    EXPECT_EQ(accepted.error().message.rfind("--gpu: no CUDA device: ", 0), 0u) << accepted.error().message;
  }
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 0);
}

// Context parallelism is hybrid_parallel's, beside data, tensor and pipeline
// parallelism (the data group then the dp × cp ranks): refused otherwise in
// one line, before any device or communication (dry-run groups only say their
// size); accepted, it gets as far as the device.
TEST(GptTrainingRefusals, ContextParallelismIsHybridParallelsBesideTensorAndPipelineParallelism) {
  MemoryLedger ledger;
  const auto two = comm::make_dry_run_communicator(0, 2);
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::torch_ddp;
  auto ddp = GptTraining::create(small_gpt2(), ledger, 1, 32, 1, OptimizerOptions{}, GpuDataParallel{two.get(), plugin}, planner::RecomputeMode::none, {}, {}, 0,
                                 GpuContextParallel{two.get()});
  ASSERT_FALSE(ddp.ok());
  EXPECT_EQ(ddp.error().message, "--cp 2: context parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
  plugin.kind = planner::PluginKind::hybrid_parallel;
  const GpuDataParallel hybrid{two.get(), plugin};
  if (!no_device_reason().empty()) {
    for (const bool sequence_parallel : {false, true}) {
      auto beside_tp = GptTraining::create(small_gpt2(), ledger, 1, 32, 1, OptimizerOptions{}, hybrid, planner::RecomputeMode::none,
                                           GpuTensorParallel{two.get(), sequence_parallel}, {}, 0, GpuContextParallel{two.get()});
      ASSERT_FALSE(beside_tp.ok());
      EXPECT_EQ(beside_tp.error().message.rfind("--gpu: no CUDA device: ", 0), 0u) << beside_tp.error().message;
    }
    auto beside_pp = GptTraining::create(small_gpt2(), ledger, 1, 32, 1, OptimizerOptions{}, hybrid, planner::RecomputeMode::none, {},
                                         GpuPipelineParallel{two.get()}, 0, GpuContextParallel{two.get()});
    ASSERT_FALSE(beside_pp.ok());
    EXPECT_EQ(beside_pp.error().message.rfind("--gpu: no CUDA device: ", 0), 0u) << beside_pp.error().message;
  }
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 0);
}

// Where this machine has no device, creating the step says so in one line.
TEST(GptTrainingRefusals, NoDeviceIsOneLine) {
  const std::string reason = no_device_reason();
  if (reason.empty()) GTEST_SKIP() << "a CUDA device is here";
  MemoryLedger ledger;
  auto refused = GptTraining::create(small_gpt2(), ledger, 2, 8, 1, OptimizerOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message.rfind("--gpu: no CUDA device: ", 0), 0u) << refused.error().message;
  EXPECT_EQ(refused.error().message.find('\n'), std::string::npos);
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 0);
}

}  // namespace
}  // namespace tessera::engine::cuda::testing
