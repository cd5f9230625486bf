#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tessera/engine/half.h"
#include "tessera/engine/loss_scaler.h"

namespace tessera::engine {
namespace {

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(to_float(to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(to_float(to_bf16(-3.5f)), -3.5f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(to_float(to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(to_float(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(to_float(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(to_float(to_bf16(std::numeric_limits<float>::infinity()))));
  const float big = to_float(to_bf16(3e38f));  // fp32's range survives, to bf16's 8 bits of precision
  EXPECT_TRUE(std::isfinite(big));
  EXPECT_LT(std::abs(big - 3e38f) / 3e38f, std::ldexp(1.0f, -8));
}

TEST(Half, Fp16NormalsSubnormalsAndOverflow) {
  EXPECT_EQ(to_float(to_fp16(1.0f)), 1.0f);
  EXPECT_EQ(to_float(to_fp16(65504.0f)), 65504.0f);  // the largest fp16
  EXPECT_TRUE(std::isinf(to_float(to_fp16(65520.0f))));
  EXPECT_EQ(to_float(to_fp16(65519.0f)), 65504.0f);
  EXPECT_EQ(to_float(to_fp16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));  // the smallest subnormal
  EXPECT_EQ(to_float(to_fp16(std::ldexp(1.0f, -26))), 0.0f);
  EXPECT_EQ(to_float(to_fp16(std::ldexp(3.0f, -25))), std::ldexp(2.0f, -24));  // 1.5 units rounds to even (2)
  EXPECT_EQ(to_float(to_fp16(-0.333251953125f)), -0.333251953125f);  // exactly representable
  EXPECT_TRUE(std::isnan(to_float(to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  // Every fp16 value survives the round trip.
  for (uint32_t bits = 0; bits < 0x7c00u; ++bits) {
    const fp16 h{static_cast<uint16_t>(bits)};
    ASSERT_EQ(to_fp16(to_float(h)).bits, h.bits) << bits;
  }
}

TEST(LossScaler, InjectedOverflowSkipsTheStepAndHalvesTheScale) {
  LossScalerOptions options;
  options.hysteresis = 1;
  options.growth_interval = 3;
  DynamicLossScaler scaler(options);
  EXPECT_TRUE(scaler.update(false));
  EXPECT_FALSE(scaler.update(true));  // overflow: skip
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(scaler.update(false));  // training goes on
  EXPECT_EQ(scaler.scale(), 65536.0);  // grown back after growth_interval good steps
}

TEST(LossScaler, HysteresisToleratesOneOverflow) {
  LossScalerOptions options;
  options.hysteresis = 2;  // Megatron-LM's default
  DynamicLossScaler scaler(options);
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 32768.0);
  // The tolerance is used up: each further overflow backs off at once...
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 16384.0);
  // ...until the scale grows again, which restores it.
  LossScalerOptions quick = options;
  quick.growth_interval = 1;
  DynamicLossScaler grows(quick);
  grows.update(true);
  grows.update(true);  // backed off once, tolerance used up
  EXPECT_TRUE(grows.update(false));
  EXPECT_EQ(grows.scale(), 65536.0);
  EXPECT_FALSE(grows.update(true));
  EXPECT_EQ(grows.scale(), 65536.0) << "one overflow is tolerated again after growth";
  EXPECT_TRUE(non_finite(std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(non_finite(1.0f));
}

}  // namespace
}  // namespace tessera::engine
