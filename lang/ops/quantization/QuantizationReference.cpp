//===- QuantizationReference.cpp - The interpreter's quantization rules --===//

#include "lang/ops/quantization/QuantizationReference.h"
#include "lang/ops/optimizers/OptimizersFormulas.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mnemo;
using namespace mnemo::reference;

QuantParams reference::quantParams(float lo, float hi, int64_t qmin,
                                   int64_t qmax, bool symmetric) {
  const float eps = std::numeric_limits<float>::epsilon();
  float minNeg = std::min(lo, 0.0f), maxPos = std::max(hi, 0.0f);
  if (symmetric) {
    float largest = std::max(-minNeg, maxPos);
    float scale = largest / float(double(qmax - qmin) / 2.0);
    return {std::max(scale, eps), 0.0f};
  }
  float scale = std::max((maxPos - minNeg) / float(qmax - qmin), eps);
  float zeroPoint = float(qmin) - std::nearbyint(minNeg / scale);
  return {scale, std::clamp(zeroPoint, float(qmin), float(qmax))};
}

/// The code `x` rounds to before clamping (PyTorch multiplies by the
/// inverse scale, rounding half to even).
static float unclampedCode(float x, QuantParams q) {
  float inverseScale = 1.0f / q.scale;
  return q.zeroPoint + std::nearbyint(x * inverseScale);
}

float reference::fakeQuantize(float x, QuantParams q, int64_t qmin,
                              int64_t qmax) {
  float code = std::clamp(unclampedCode(x, q), float(qmin), float(qmax));
  return (code - q.zeroPoint) * q.scale;
}

bool reference::fakeQuantPasses(float x, QuantParams q, int64_t qmin,
                                int64_t qmax) {
  float code = unclampedCode(x, q);
  return float(qmin) <= code && code <= float(qmax);
}

float reference::observedBound(float old, float seen, bool firstStep,
                               float averaging, bool lower) {
  if (firstStep)
    return seen;
  if (averaging == 0.0f)
    return lower ? std::min(old, seen) : std::max(old, seen);
  return old + averaging * (seen - old);
}

float reference::rowScale(float absMax) {
  return absMax == 0.0f ? 1.0f : absMax / 127.0f;
}

int reference::rowCode(float x, float scale) {
  float code = std::nearbyint(x * (1.0f / scale));
  return std::isnan(code) ? 0 : int(std::clamp(code, -127.0f, 127.0f));
}

int reference::int4Code(const signed char *packed, int64_t e) {
  unsigned byte = static_cast<unsigned char>(packed[e / 2]);
  int nibble = int(e % 2 ? byte >> 4 : byte & 0xfu);
  return nibble < 8 ? nibble : nibble - 16;
}

int reference::sparse24Position(const signed char *rowIndices, int64_t group,
                                int kept) {
  unsigned byte = static_cast<unsigned char>(rowIndices[group / 2]);
  unsigned positions = group % 2 ? byte >> 4 : byte & 0xfu;
  return int(positions >> (2 * kept)) & 3;
}

float reference::codeValue(uint8_t code, bool isSigned) {
  return optimizers::decodeCode(code, isSigned);
}

uint8_t reference::nearestCode(float x, bool isSigned) {
  // Signed maps are symmetric: the magnitude's code among 0x00..0x7f, then
  // the sign bit. Every code is tried, so no table or search order is
  // shared with the trainer.
  float magnitude = std::fabs(x);
  unsigned codes = isSigned ? 128 : 256;
  unsigned best = 0;
  float bestValue = codeValue(0, isSigned);
  for (unsigned c = 1; c < codes; ++c) {
    float value = codeValue(uint8_t(c), isSigned);
    bool beyondAll = !(magnitude <= 1.0f); // also NaN: the largest code
    bool better;
    if (beyondAll)
      better = value > bestValue;
    else {
      float distance = std::fabs(value - magnitude),
            bestDistance = std::fabs(bestValue - magnitude);
      better = distance < bestDistance ||
               (distance == bestDistance && value < bestValue);
    }
    if (better) {
      best = c;
      bestValue = value;
    }
  }
  if (isSigned && x < 0 && best != 0)
    best |= 0x80u;
  return uint8_t(best);
}
