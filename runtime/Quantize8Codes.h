//===- Quantize8Codes.h - The values of adamw8bit's 8-bit codes -----------===//
//
// The one definition of the dynamic 8-bit codes (runtime/Quantize8.h says
// what they are), without any include, so that the CPU runtime, the
// interpreter and the CUDA kernels (NVRTC gets this file spliced into the
// kernel library by MnemoCuda.cmake) decode alike.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_QUANTIZE8CODES_H
#define MNEMO_RUNTIME_QUANTIZE8CODES_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MNEMO_QUANT8_HD __host__ __device__
#else
#define MNEMO_QUANT8_HD
#endif

namespace mnemo {
namespace quant8 {

/// The value of `code`, in [-1, 1] (signed) or [0, 1] (unsigned): after
/// the sign bit (signed codes), E zero bits, a one bit, and F fraction
/// bits give 10^-E times the F-bit midpoint between 0.1 and 1.
MNEMO_QUANT8_HD inline float decodeCode(unsigned code, bool isSigned) {
  const float kPowersOfTen[8] = {1.0f,  1e-1f, 1e-2f, 1e-3f,
                                 1e-4f, 1e-5f, 1e-6f, 1e-7f};
  int bits = isSigned ? 7 : 8;
  unsigned magnitude = isSigned ? (code & 0x7fu) : (code & 0xffu);
  float sign = isSigned && (code & 0x80u) ? -1.0f : 1.0f;
  if (magnitude == 0)
    return 0.0f;
  int highest = bits - 1;
  while (!(magnitude & (1u << highest)))
    --highest;
  int exponent = bits - 1 - highest; // the zeros before the one bit
  unsigned fraction = magnitude & ((1u << highest) - 1u);
  float linear =
      0.1f + 0.9f * ((float(fraction) + 0.5f) / float(1u << highest));
  return sign * linear * kPowersOfTen[exponent];
}

} // namespace quant8
} // namespace mnemo

#endif // MNEMO_RUNTIME_QUANTIZE8CODES_H
