//===- OptimizersKernels.h - The optimizer on the CPU -----------*- C++ -*-===//
//
// The CPU kernels of the optimizer's ops (OptimizersKernels.cpp), which the
// generated code calls (OptimizersEmission.cpp includes this header where
// a step has one), and adamw8bit's state format.
//
// adamw8bit (Dettmers et al. 2021, "8-bit Optimizers via Block-wise
// Quantization") cuts a tensor into blocks of 2048 elements; each block
// stores its absolute maximum in f32 and one byte per element, a code of
// the element divided by that maximum. The codes are dynamic ("tree")
// quantization (OptimizersFormulas.h gives their values): small exponents
// keep 6 fraction bits for values near the maximum, and values down to
// 1e-6 (signed) or 1e-7 (unsigned) of it still have a code. The byte 0 is
// 0.0 in both maps, so zero-initialized state is zero. The reference
// interpreter shares only the codes' values and has its own step and search
// (lang/ops/quantization/QuantizationReference.h).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSKERNELS_H
#define MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSKERNELS_H

#include "lang/ops/optimizers/OptimizersFormulas.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace mnemo {
namespace quant8 {

/// Elements per quantization block.
constexpr int64_t kBlock = 2048;
/// Tensors with fewer elements keep f32 state (the paper's threshold).
constexpr int64_t kMinElements = 4096;

inline int64_t blockCount(int64_t elements, int64_t block = kBlock) {
  return (elements + block - 1) / block;
}

inline float decode(uint8_t code, bool isSigned) {
  return optimizers::decodeCode(code, isSigned);
}

/// A map's codes sorted by value, for the nearest-code search.
struct CodeTable {
  std::array<float, 256> value;
  std::array<uint8_t, 256> code;
  int size = 0;
  std::array<float, 256> byCode; ///< decode(), looked up
  /// The non-negative codes sorted by value (signed codes are symmetric),
  /// and per bucket of magnitudes (the top 12 bits of an f32 without its
  /// sign), how many of them lie below the bucket: the search starts there.
  std::array<float, 256> magnitude;
  std::array<uint8_t, 256> magnitudeCode;
  int magnitudes = 0;
  std::array<uint16_t, 4096> bucketStart;
};

inline uint32_t floatBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

inline CodeTable makeTable(bool isSigned) {
  std::array<std::pair<float, uint8_t>, 256> entries;
  int n = 0;
  for (int c = 0; c < 256; ++c) {
    // Signed "-0" (0x80) duplicates 0x00.
    if (isSigned && c == 0x80)
      continue;
    entries[n++] = {decode(uint8_t(c), isSigned), uint8_t(c)};
  }
  std::sort(entries.begin(), entries.begin() + n);
  CodeTable table;
  for (int i = 0; i < n; ++i)
    if (entries[i].first >= 0.0f) {
      table.magnitude[table.magnitudes] = entries[i].first;
      table.magnitudeCode[table.magnitudes++] = entries[i].second;
    }
  for (uint32_t bucket = 0; bucket < 4096; ++bucket) {
    uint32_t lowBits = bucket << 19;
    float low;
    std::memcpy(&low, &lowBits, sizeof low);
    int below = 0;
    while (below < table.magnitudes && table.magnitude[below] < low)
      ++below;
    table.bucketStart[bucket] = uint16_t(below);
  }
  for (int c = 0; c < 256; ++c)
    table.byCode[c] = decode(uint8_t(c), isSigned);
  table.size = n;
  for (int i = 0; i < n; ++i) {
    table.value[i] = entries[i].first;
    table.code[i] = entries[i].second;
  }
  return table;
}

inline const CodeTable &table(bool isSigned) {
  static const CodeTable signedTable = makeTable(true);
  static const CodeTable unsignedTable = makeTable(false);
  return isSigned ? signedTable : unsignedTable;
}

/// decode(), by table.
inline float value(uint8_t code, bool isSigned) {
  return table(isSigned).byCode[code];
}

/// The code nearest to `x` (already divided by the block's maximum); a
/// tie goes to the smaller magnitude. The optimizer encodes every element of
/// every step, so the search starts at x's bucket and steps over at most a
/// few codes.
inline uint8_t encode(const CodeTable &t, float x) {
  float m = std::fabs(x);
  if (!(m < 2.0f)) // also NaN: the largest code (never in Adam's moments)
    m = 2.0f;
  int i = t.bucketStart[floatBits(m) >> 19];
  while (i < t.magnitudes && t.magnitude[i] < m)
    ++i;
  int nearest;
  if (i == 0)
    nearest = 0;
  else if (i == t.magnitudes)
    nearest = t.magnitudes - 1;
  else
    nearest = m - t.magnitude[i - 1] <= t.magnitude[i] - m ? i - 1 : i;
  uint8_t code = t.magnitudeCode[nearest];
  // Signed tables hold both signs: a negative x takes its magnitude's code
  // with the sign bit (zero stays 0x00).
  bool isSigned = t.size == 255;
  return isSigned && x < 0 && code != 0 ? uint8_t(code | 0x80) : code;
}

inline uint8_t encode(float x, bool isSigned) {
  return encode(table(isSigned), x);
}

/// Quantizes `n` values into `codes` and one maximum per block of `block`.
inline void quantize(int64_t n, int64_t block, const float *values,
                     uint8_t *codes, float *absmax, bool isSigned) {
  for (int64_t b = 0; b * block < n; ++b) {
    int64_t begin = b * block, end = std::min(n, begin + block);
    float largest = 0;
    for (int64_t i = begin; i < end; ++i)
      largest = std::max(largest, std::fabs(values[i]));
    absmax[b] = largest;
    float inverse = largest > 0 ? 1.0f / largest : 0.0f;
    const CodeTable &t = table(isSigned);
    for (int64_t i = begin; i < end; ++i)
      codes[i] = encode(t, values[i] * inverse);
  }
}

/// One AdamW step on 8-bit moments (the `adam8bit_update` op): both
/// moments are dequantized, updated in f32 with PyTorch's bias correction,
/// and quantized again, block by block (a block's new maximum is known
/// only once its elements are updated). The outputs may alias the inputs.
inline void adamw8bitStep(int64_t n, int64_t block, const float *param,
                          const float *grad, const uint8_t *expAvgCodes,
                          const float *expAvgMax, const uint8_t *expAvgSqCodes,
                          const float *expAvgSqMax, float *newParam,
                          uint8_t *newExpAvgCodes, float *newExpAvgMax,
                          uint8_t *newExpAvgSqCodes, float *newExpAvgSqMax,
                          float lr, int64_t step, double beta1, double beta2,
                          double eps, double weightDecay) {
  optimizers::AdamScalars s = optimizers::adamScalars(
      double(lr), double(step), beta1, beta2, eps, weightDecay);
  const CodeTable &signedCodes = table(true), &unsignedCodes = table(false);
  std::vector<float> m(size_t(std::min(n, block))),
      v(size_t(std::min(n, block)));
  for (int64_t b = 0; b * block < n; ++b) {
    int64_t begin = b * block, end = std::min(n, begin + block);
    float mMax = expAvgMax[b], vMax = expAvgSqMax[b];
    for (int64_t i = begin; i < end; ++i) {
      float g = grad[i];
      float mi = signedCodes.byCode[expAvgCodes[i]] * mMax;
      float vi = unsignedCodes.byCode[expAvgSqCodes[i]] * vMax;
      float p = param[i];
      optimizers::adamStep(s, /*decoupled=*/true, p, g, mi, vi);
      newParam[i] = p;
      m[i - begin] = mi;
      v[i - begin] = vi;
    }
    quantize(end - begin, block, m.data(), newExpAvgCodes + begin,
             newExpAvgMax + b, true);
    quantize(end - begin, block, v.data(), newExpAvgSqCodes + begin,
             newExpAvgSqMax + b, false);
  }
}

} // namespace quant8

namespace cpu {

/// The learning rate of this step (lr_schedule).
float lrSchedule(bool cosine, int64_t step, int64_t totalSteps, double baseLr,
                 int64_t warmup, int64_t steps, double minLr);
/// sqrt(sum of squares) over several tensors, accumulated in double.
float globalNorm(const float *const *tensors, const int64_t *sizes, int count);
/// The sum of squares itself (ZeRO-1 adds the ranks' parts).
double sumOfSquares(const float *const *tensors, const int64_t *sizes,
                    int count);
/// torch.cuda.amp.GradScaler.update for f16 training (scalars; the count
/// of consecutive finite steps is held in a float).
void lossScaleUpdate(float norm, float scale, float count, float *newScale,
                     float *newCount, float *skip, double growthFactor,
                     double backoffFactor, int64_t growthInterval);
void adamUpdate(int64_t n, const float *param, const float *grad,
                const float *expAvg, const float *expAvgSq, float *newParam,
                float *newExpAvg, float *newExpAvgSq, float lr, int64_t step,
                double beta1, double beta2, double eps, double weightDecay,
                bool decoupled, const float *skip = nullptr);
/// adamw8bit: the moments as codes and block maxima, updated in place or
/// into new buffers.
void adam8bitUpdate(int64_t n, int64_t block, const float *param,
                    const float *grad, const uint8_t *expAvgCodes,
                    const float *expAvgMax, const uint8_t *expAvgSqCodes,
                    const float *expAvgSqMax, float *newParam,
                    uint8_t *newExpAvgCodes, float *newExpAvgMax,
                    uint8_t *newExpAvgSqCodes, float *newExpAvgSqMax, float lr,
                    int64_t step, double beta1, double beta2, double eps,
                    double weightDecay, const float *skip = nullptr);
void sgdUpdate(int64_t n, const float *param, const float *grad,
               const float *buffer, float *newParam, float *newBuffer, float lr,
               int64_t step, double momentum, double dampening,
               double weightDecay, bool nesterov, const float *skip = nullptr);

} // namespace cpu
} // namespace mnemo

#endif // MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSKERNELS_H
