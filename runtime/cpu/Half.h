//===- Half.h - bf16 and f16 storage for the CPU backend --------*- C++ -*-===//
//
// Mixed-precision programs store activations in 16 bits and compute in
// f32: these types hold the bits, widen exactly to float, and narrow with
// round-to-nearest-even (as the interpreter's roundTo and CUDA's
// __float2bfloat16_rn / __float2half_rn do), NaN kept a quiet NaN.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_CPU_HALF_H
#define MNEMO_RUNTIME_CPU_HALF_H

#include <cstdint>
#include <cstring>

namespace mnemo::cpu {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct bf16_t {
  uint16_t bits = 0;
  bf16_t() = default;
  bf16_t(float f) {
    uint32_t u = floatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) { // NaN: keep it quiet
      bits = uint16_t((u >> 16) | 0x40);
      return;
    }
    u += 0x7fffu + ((u >> 16) & 1u); // round to nearest even
    bits = uint16_t(u >> 16);
  }
  operator float() const { return bitsFloat(uint32_t(bits) << 16); }
};

struct f16_t {
  uint16_t bits = 0;
  f16_t() = default;
  f16_t(float f) {
    uint32_t u = floatBits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) { // NaN
      bits = uint16_t(sign | 0x7e00u);
      return;
    }
    if (abs >= 0x477ff000u) { // rounds to or past 65520: infinity
      bits = uint16_t(sign | 0x7c00u);
      return;
    }
    if (abs < 0x38800000u) { // below f16's normal range: subnormal or zero
      // Scale into f16's subnormal step (2^-24) and round to nearest even
      // by the float adder.
      float scaled = bitsFloat(abs) * 16777216.0f; // 2^24
      float rounded = scaled + 12582912.0f - 12582912.0f;
      bits = uint16_t(sign | uint32_t(rounded));
      return;
    }
    // Normal: rebias the exponent, round the 13 dropped mantissa bits.
    uint32_t mantissaRound = abs + 0xfffu + ((abs >> 13) & 1u);
    bits = uint16_t(sign | ((mantissaRound - 0x38000000u) >> 13));
  }
  operator float() const {
    uint32_t sign = uint32_t(bits & 0x8000u) << 16;
    uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
    if (exponent == 0) // zero or subnormal: mantissa * 2^-24
      return bitsFloat(sign) +
             (sign ? -1.0f : 1.0f) * float(mantissa) * 5.9604644775390625e-8f;
    if (exponent == 31)
      return bitsFloat(sign | 0x7f800000u | (mantissa << 13));
    return bitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
};

} // namespace mnemo::cpu

#endif // MNEMO_RUNTIME_CPU_HALF_H
