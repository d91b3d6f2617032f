//===- LogSumExpKernels.h - logsumexp on the CPU ----------------*- C++ -*-===//
//
// The CPU kernel generated code calls for mnemo.logsumexp (the emission
// model, LogSumExpEmission.cpp, includes this header where a model uses
// it). Part of the runtime side of the family: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_LOGSUMEXP_LOGSUMEXPKERNELS_H
#define MNEMO_LANG_OPS_LOGSUMEXP_LOGSUMEXPKERNELS_H

#include "lang/ops/elementwise/ElementwiseFormulas.h"
#include "runtime/cpu/Parallel.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace mnemo::cpu {

/// y[o, i] = log(sum_j exp(x[o, j, i])) for x as [outer, n, inner]: each
/// row shifted by its maximum (0 where that is infinite, so a row of -inf
/// gives -inf and one with +inf gives +inf, as torch.logsumexp), the
/// exponentials summed in double. A NaN anywhere in a row gives NaN.
inline void logSumExp(const float *x, float *y, int64_t outer, int64_t n,
                      int64_t inner) {
  parallelFor(outer * inner, rowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t o = row / inner, i = row % inner;
      const float *xs = x + o * n * inner + i;
      float m = -std::numeric_limits<float>::infinity();
      bool nan = false;
      for (int64_t j = 0; j < n; ++j) {
        float v = xs[j * inner];
        nan |= v != v;
        m = v > m ? v : m;
      }
      float shift = std::isinf(m) ? 0.0f : m;
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += elementwise::fastExp(xs[j * inner] - shift);
      y[row] = nan ? std::numeric_limits<float>::quiet_NaN()
                   : float(std::log(sum)) + shift;
    }
  });
}

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_LOGSUMEXP_LOGSUMEXPKERNELS_H
