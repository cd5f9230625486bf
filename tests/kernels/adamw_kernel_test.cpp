// AdamW over flat buffers under the block emulator against the CPU optimizer
// (optimizer.h), two steps (bias corrections of t = 1 and 2), two ranges (one
// with weight decay, one without) of odd lengths, fp32 parameters and 16-bit
// parameters with fp32 master weights; fp16 with a loss scale. Elements are
// independent: the same bits are expected.
#include <gtest/gtest.h>

#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/kernels/adamw.h"
#include "tessera/engine/optimizer.h"

namespace tessera::engine::kernels::testing {
namespace {

template <typename T>
void check_adamw(double loss_scale) {
  const int64_t decayed = 1001, plain = 257, n = decayed + plain;
  const std::vector<planner::ShardPiece> pieces = {{0, 0, 0, decayed}, {1, 0, decayed, plain}};
  OptimizerOptions options;
  options.max_grad_norm = 0;  // no clipping: the gradient factor is 1 / loss scale (clipping is the host's, before any kernel)
  const std::vector<T> params0 = random_values<T>(n, 31);
  std::vector<T> params = params0;
  MemoryLedger ledger;
  Optimizer<T> cpu(ledger, params.data(), n, pieces, {true, false}, options);

  std::vector<float> weights(n), m(n, 0.0f), v(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) weights[i] = widen(params0[i]);
  std::vector<T> k_params = params0;
  for (int64_t step = 1; step <= 2; ++step) {
    const std::vector<T> grads = random_values<T>(n, 40 + static_cast<uint32_t>(step), static_cast<float>(loss_scale));
    ASSERT_TRUE(cpu.apply(grads.data(), 1.0, loss_scale).has_value());
    const AdamWScalars scalars = adamw_scalars(options.learning_rate, options.beta1, options.beta2, options.eps, step, 1.0 / loss_scale);
    T* out = std::is_same_v<T, float> ? nullptr : k_params.data();  // fp32: the weights are the parameters
    for (const planner::ShardPiece& piece : pieces) {
      const int64_t at = piece.offset_in_shard;
      const float wd = piece.parameter == 0 ? static_cast<float>(options.weight_decay) : 0.0f;
      BlockEmulator(ThreadOrder::reverse).launch(elementwise_shape(piece.numel), [&](HostContext& ctx) {
        adamw_body(ctx, out ? out + at : out, weights.data() + at, m.data() + at, v.data() + at, grads.data() + at, piece.numel, wd, scalars);
      });
    }
  }
  const std::string at = std::string(type_name<T>()) + " n " + std::to_string(n);
  expect_bits_equal("adamw weights " + at, weights, std::vector<float>(cpu.weights(), cpu.weights() + n));
  expect_bits_equal("adamw exp_avg " + at, m, std::vector<float>(cpu.state(0), cpu.state(0) + n));
  expect_bits_equal("adamw exp_avg_sq " + at, v, std::vector<float>(cpu.state(1), cpu.state(1) + n));
  if constexpr (!std::is_same_v<T, float>) expect_bits_equal("adamw 16-bit parameters " + at, k_params, params);
}

TEST(KernelEmulation, AdamWMatchesCpuOptimizerBitForBit) {
  check_adamw<float>(1.0);
  check_adamw<bf16>(1.0);
  check_adamw<fp16>(1024.0);
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
