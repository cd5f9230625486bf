// IEEE binary16 (fp16) and bfloat16 storage with round-to-nearest-even
// conversions to and from fp32, written once for the CPU and the CUDA backend
// (host_device.h). bfloat16 keeps fp32's 8 exponent bits and 7 mantissa bits
// (Kalamkar et al. 2019); fp16 has 5 exponent and 10 mantissa bits
// (IEEE 754-2008), so it overflows above 65504 and needs loss scaling.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tessera/engine/host_device.h"

namespace tessera::engine {

struct bf16 {
  uint16_t bits = 0;
};
struct fp16 {
  uint16_t bits = 0;
};

TESSERA_HOST_DEVICE uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TESSERA_HOST_DEVICE float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TESSERA_HOST_DEVICE bf16 to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};  // NaN stays a (quiet) NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // to nearest, ties to even
  return bf16{static_cast<uint16_t>((u + rounding) >> 16)};
}

TESSERA_HOST_DEVICE float to_float(bf16 h) { return bits_float(static_cast<uint32_t>(h.bits) << 16); }

TESSERA_HOST_DEVICE fp16 to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return fp16{static_cast<uint16_t>(sign | 0x7e00u)};  // NaN
  if (magnitude >= 0x477ff000u) return fp16{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to at least 65520: infinity
  if (magnitude < 0x38800000u) {
    // Subnormal half (below 2^-14) or zero: shift the 24-bit significand into place, rounding to nearest even.
    if (magnitude < 0x33000000u) return fp16{sign};  // below half of the smallest subnormal
    const uint32_t exponent = magnitude >> 23;
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // value / 2^-24 = significand · 2^(exponent - 126)
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t result = significand >> shift;
    const uint32_t remainder = significand & ((1u << shift) - 1u);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return fp16{static_cast<uint16_t>(sign | result)};
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa from 23 to 10 bits.
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return fp16{static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13))};
}

TESSERA_HOST_DEVICE float to_float(fp16 h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  const uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1fu) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // infinity or NaN
  if (exponent == 0) {
    // Zero or subnormal: mantissa · 2^-24.
    const float value = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -value : value;
  }
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Storage types and the type their arithmetic runs in: 16-bit values are
// widened to fp32 for every computation and narrowed (rounded to nearest even)
// when stored; fp32 and fp64 compute in themselves. Ops read with widen() and
// write with narrow<T>(), so one template serves fp64 gradient checks, fp32
// training and 16-bit mixed precision.
template <typename T>
struct compute_type {
  using type = float;
};
template <>
struct compute_type<double> {
  using type = double;
};
template <typename T>
using compute_t = typename compute_type<T>::type;

template <typename T>
inline constexpr bool is_16_bit = sizeof(T) == 2;

TESSERA_HOST_DEVICE float widen(float x) { return x; }
TESSERA_HOST_DEVICE double widen(double x) { return x; }
TESSERA_HOST_DEVICE float widen(bf16 x) { return to_float(x); }
TESSERA_HOST_DEVICE float widen(fp16 x) { return to_float(x); }

template <typename T>
TESSERA_HOST_DEVICE T narrow(compute_t<T> x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return to_bf16(x);
  } else if constexpr (std::is_same_v<T, fp16>) {
    return to_fp16(x);
  } else {
    return x;
  }
}

}  // namespace tessera::engine
