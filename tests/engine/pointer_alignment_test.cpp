#include "tessera/engine/device/pointer_alignment.h"

#include <gtest/gtest.h>

#include "tessera/engine/half.h"

namespace tessera::engine {
namespace {

TEST(PointerAlignment, LargestPowerOfTwoDividingTheAddressUpTo256) {
  EXPECT_EQ(pointer_alignment(0), 256u);  // cudaMalloc's blocks: 256-byte aligned or better
  EXPECT_EQ(pointer_alignment(4096), 256u);
  EXPECT_EQ(pointer_alignment(768), 256u);
  EXPECT_EQ(pointer_alignment(384), 128u);
  EXPECT_EQ(pointer_alignment(96), 32u);
  EXPECT_EQ(pointer_alignment(6), 2u);
  EXPECT_EQ(pointer_alignment(7), 1u);
  EXPECT_EQ(pointer_alignment(64, 16), 16u);
}

// A bf16 parameter at flat offset 3 · 64 + 1 (a bias after three 64-wide
// tensors and a 1-element one) of a 256-byte aligned buffer: 2-byte aligned,
// which cuBLASLt must be told.
TEST(PointerAlignment, FlatOffsetsOfBf16ParametersAreOftenBarelyAligned) {
  const uintptr_t base = 1u << 20;
  EXPECT_EQ(pointer_alignment(base + (3 * 64 + 1) * sizeof(bf16)), 2u);
  EXPECT_EQ(pointer_alignment(base + 24 * sizeof(bf16)), 16u);
}

}  // namespace
}  // namespace tessera::engine
