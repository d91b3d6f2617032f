//===- LossesFormulas.h - What the classification losses are ----*- C++ -*-===//
//
// The per-element formulas of cross_entropy and its gradient, stated once:
// a row's terms from its log-sum-exp (max-shifted, found by each
// implementation its own way). The reference interpreter evaluates them in
// double with the C library (LossesInterpreter.cpp), the CPU kernels
// (LossesKernels.h) and the CUDA kernels (LossesKernels.cuh, to which NVRTC
// gives this file by name) in f32 with FastMath.
//
// It includes nothing but the formula macros and math policies: NVRTC
// compiles without a C++ standard library.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_LOSSES_LOSSESFORMULAS_H
#define MNEMO_LANG_OPS_LOSSES_LOSSESFORMULAS_H

#include "lang/ops/elementwise/ElementwiseFormulas.h"

namespace mnemo::losses {

/// A row's loss, -log_softmax(x)[target] = logSumExp - x[target], with
/// label smoothing e mixing in the mean over the classes of
/// -log_softmax(x) = logSumExp - sum(x) / classes, as PyTorch:
/// (1 - e) * nll + e * smooth. Without smoothing the row's sum is not read
/// (it may be infinite where the loss is not).
template <typename T>
MNEMO_FORMULA T crossEntropyTerm(T logSumExp, T targetLogit, T rowSum,
                                 T classes, T smoothing) {
  T nll = logSumExp - targetLogit;
  if (smoothing == T(0))
    return nll;
  return (T(1) - smoothing) * nll + smoothing * (logSumExp - rowSum / classes);
}

/// d x[c] = (softmax(x)[c] - (1 - e) onehot(target)[c] - e / classes) *
/// scale, with scale the incoming gradient over the rows that take part
/// (the loss is their mean) and e the label smoothing.
template <typename T, typename M = elementwise::FastMath>
MNEMO_FORMULA T crossEntropyGradValue(T x, T logSumExp, bool isTarget, T scale,
                                      T classes, T smoothing) {
  T target = isTarget ? T(1) - smoothing : T(0);
  return (M::exp(x - logSumExp) - target - smoothing / classes) * scale;
}

/// Whether a row takes part in the loss: its target is not ignore_index
/// (PyTorch's default, -100, lies outside every class range).
MNEMO_FORMULA bool countsTowardLoss(long long target, long long ignoreIndex) {
  return target != ignoreIndex;
}

} // namespace mnemo::losses

#endif // MNEMO_LANG_OPS_LOSSES_LOSSESFORMULAS_H
