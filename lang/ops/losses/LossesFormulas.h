//===- LossesFormulas.h - What the classification losses compute -*- C++
//-*-===//
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

namespace mnemo {
namespace losses {

/// A row's loss, -log_softmax(x)[target] = logSumExp - x[target].
template <typename T>
MNEMO_FORMULA T crossEntropyTerm(T logSumExp, T targetLogit) {
  return logSumExp - targetLogit;
}

/// d x[c] = (softmax(x)[c] - onehot(target)[c]) * scale, with scale the
/// incoming gradient over the rows (the loss is a mean).
template <typename T, typename M = elementwise::FastMath>
MNEMO_FORMULA T crossEntropyGradValue(T x, T logSumExp, bool isTarget,
                                      T scale) {
  return (M::exp(x - logSumExp) - (isTarget ? T(1) : T(0))) * scale;
}

} // namespace losses
} // namespace mnemo

#endif // MNEMO_LANG_OPS_LOSSES_LOSSESFORMULAS_H
