//===- SoftmaxKernels.h - softmax on the CPU --------------------*- C++ -*-===//
//
// The CPU kernel generated code calls for softmax and log_softmax (the
// emission model, SoftmaxEmission.cpp, includes this header where a model
// uses it). Rows in parallel; the elements by SoftmaxFormulas.h. Part of
// the runtime side of the family: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_SOFTMAX_SOFTMAXKERNELS_H
#define MNEMO_LANG_OPS_SOFTMAX_SOFTMAXKERNELS_H

#include "lang/ops/softmax/SoftmaxFormulas.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace mnemo::cpu {

/// Softmax or log-softmax along the middle of x as [outer, n, inner].
inline void softmaxAlongAxis(const float *x, float *y, int64_t outer, int64_t n,
                             int64_t inner, bool logarithm) {
  parallelFor(outer * inner, rowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t o = row / inner, in = row % inner;
      const float *xs = x + o * n * inner + in;
      float *ys = y + o * n * inner + in;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j)
        m = std::max(m, xs[j * inner]);
      if (logarithm) {
        double sum = 0;
        for (int64_t j = 0; j < n; ++j)
          sum += softmax::shiftedExp(xs[j * inner], m);
        float logSum = float(std::log(sum));
        for (int64_t j = 0; j < n; ++j)
          ys[j * inner] = softmax::logSoftmaxValue(xs[j * inner], m, logSum);
      } else {
        // The exponentials into the output, then one scale: one pass of
        // exp, vectorized when the row is contiguous (the same product as
        // softmaxValue, in two steps).
        float sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          float e = softmax::shiftedExp(xs[j * inner], m);
          ys[j * inner] = e;
          sum += e;
        }
        float inv = 1.0f / sum;
        for (int64_t j = 0; j < n; ++j)
          ys[j * inner] *= inv;
      }
    }
  });
}

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_SOFTMAX_SOFTMAXKERNELS_H
