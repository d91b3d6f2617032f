//===- LossesKernels.h - Classification losses on the CPU -------*- C++ -*-===//
//
// The CPU kernels generated code calls for cross_entropy, its gradient and
// accuracy (the emission model, LossesEmission.cpp, includes this header
// where a model uses them). A row's log-sum-exp sums in double; the terms
// are LossesFormulas.h's. A target outside the classes is reported through
// the kernels' error channel (runtime/cpu/Kernels.h's reportError). Part of
// the runtime side of the family: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_H
#define MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_H

#include "lang/ops/losses/LossesFormulas.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace mnemo {
namespace cpu {

/// log(sum(exp(row))) of a row of `classes`, max-shifted, summed in double.
inline float rowLogSumExp(const float *row, int64_t classes) {
  float m = *std::max_element(row, row + classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c)
    sum += fastExp(row[c] - m);
  return float(std::log(sum)) + m;
}

/// Mean cross-entropy over rows; false if a target is out of range.
inline bool crossEntropy(const float *logits, const int32_t *targets,
                         int64_t rows, int64_t classes, float *loss) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int32_t t = targets[r];
    if (t < 0 || t >= classes) {
      reportError("target " + std::to_string(t) + " is out of range for " +
                  std::to_string(classes) + " classes");
      return false;
    }
    const float *row = logits + r * classes;
    float m = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += fastExp(row[c] - m);
    // The row's log-sum-exp kept in double, as the mean is.
    total += losses::crossEntropyTerm(std::log(sum) + m, double(row[t]));
  }
  *loss = float(total / double(rows));
  return true;
}

/// The logits' gradient; false if a target is out of range.
inline bool crossEntropyGrad(const float *grad, const float *logits,
                             const int32_t *targets, int64_t rows,
                             int64_t classes, float *dlogits) {
  float scale = grad[0] / float(rows);
  bool ok = true;
  parallelFor(rows, rowGrain(classes), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int32_t t = targets[r];
      const float *row = logits + r * classes;
      float *out = dlogits + r * classes;
      if (t < 0 || t >= classes) {
        ok = false;
        continue;
      }
      float logSum = rowLogSumExp(row, classes);
      for (int64_t c = 0; c < classes; ++c)
        out[c] = losses::crossEntropyGradValue(row[c], logSum, c == t, scale);
    }
  });
  if (!ok)
    reportError("a target is out of range for " + std::to_string(classes) +
                " classes");
  return ok;
}

/// The fraction of rows whose first maximum is the target.
inline void accuracy(const float *logits, const int32_t *targets, int64_t rows,
                     int64_t classes, float *out) {
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = logits + r * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best])
        best = c;
    correct += best == targets[r];
  }
  *out = float(double(correct) / double(rows));
}

/// mean((a - b)^2), the differences in f32 (as PyTorch's), their squares
/// summed in double.
inline void mse(const float *a, const float *b, int64_t n, float *out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += double(a[i] - b[i]) * double(a[i] - b[i]);
  *out = float(sum / double(n));
}

} // namespace cpu
} // namespace mnemo

#endif // MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_H
