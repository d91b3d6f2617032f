//===- FakeQuant.h - Observers and fake quantization on the host ----------===//
//
// Whole-tensor loops over runtime/FakeQuantRules.h for the CPU trainer. A
// tensor is read as [outer, channels, inner]: element e is in channel (e /
// inner) % channels (channels = 1 and inner = n for one range per tensor).
// Header-only and free of LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_FAKEQUANT_H
#define MNEMO_RUNTIME_FAKEQUANT_H

#include "runtime/FakeQuantRules.h"

#include <cstdint>
#include <limits>
#include <vector>

namespace mnemo {
namespace fakequant {

/// `observe_minmax`: the range of each channel of `x`, folded into the
/// observed range. `newLo`/`newHi` may be `lo`/`hi`.
inline void observeMinMax(const float *x, int64_t n, int64_t channels,
                          int64_t inner, const float *lo, const float *hi,
                          float *newLo, float *newHi, int64_t step,
                          float averaging) {
  std::vector<float> seenLo(channels, std::numeric_limits<float>::infinity()),
      seenHi(channels, -std::numeric_limits<float>::infinity());
  for (int64_t e = 0; e < n; ++e) {
    int64_t c = (e / inner) % channels;
    seenLo[c] = x[e] < seenLo[c] ? x[e] : seenLo[c];
    seenHi[c] = x[e] > seenHi[c] ? x[e] : seenHi[c];
  }
  for (int64_t c = 0; c < channels; ++c) {
    newLo[c] = observe(lo[c], seenLo[c], step <= 1, averaging, true);
    newHi[c] = observe(hi[c], seenHi[c], step <= 1, averaging, false);
  }
}

/// `fake_quant` (with `grad`: `fake_quant_grad`, the gradient that passes).
inline void fakeQuantize(const float *x, const float *grad, int64_t n,
                         int64_t channels, int64_t inner, const float *lo,
                         const float *hi, int qmin, int qmax, bool symmetric,
                         float *out) {
  std::vector<QParams> q(channels);
  for (int64_t c = 0; c < channels; ++c)
    q[c] = qparams(lo[c], hi[c], qmin, qmax, symmetric);
  for (int64_t e = 0; e < n; ++e) {
    const QParams &p = q[(e / inner) % channels];
    out[e] = grad ? (passesGradient(x[e], p, qmin, qmax) ? grad[e] : 0.0f)
                  : fakeQuant(x[e], p, qmin, qmax);
  }
}

} // namespace fakequant
} // namespace mnemo

#endif // MNEMO_RUNTIME_FAKEQUANT_H
