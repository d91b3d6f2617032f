//===- SoftmaxFormulas.h - What softmax computes ----------------*- C++ -*-===//
//
// The per-element formulas of softmax and log-softmax, stated once: a row's
// element from the row's maximum and its sum of exp(x - max). The
// reference interpreter evaluates them in double with the C library
// (SoftmaxInterpreter.cpp), the CPU kernels (SoftmaxKernels.h) and the CUDA
// kernels (SoftmaxKernels.cuh, to which NVRTC gives this file by name) in
// f32 with FastMath. How a row's maximum and sum are found differs: in
// double on the host, by a block's reduction on the GPU.
//
// It includes nothing but the formula macros and math policies: NVRTC
// compiles without a C++ standard library.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_SOFTMAX_SOFTMAXFORMULAS_H
#define MNEMO_LANG_OPS_SOFTMAX_SOFTMAXFORMULAS_H

#include "lang/ops/elementwise/ElementwiseFormulas.h"

namespace mnemo::softmax {

/// exp(x - rowMax): the numerator, and the term of the row's sum.
template <typename T, typename M = elementwise::FastMath>
MNEMO_FORMULA T shiftedExp(T x, T rowMax) {
  return M::exp(x - rowMax);
}

/// softmax(x) = exp(x - rowMax) / sum, with inverseSum = 1 / sum.
template <typename T, typename M = elementwise::FastMath>
MNEMO_FORMULA T softmaxValue(T x, T rowMax, T inverseSum) {
  return shiftedExp<T, M>(x, rowMax) * inverseSum;
}

/// log_softmax(x) = x - rowMax - log(sum).
template <typename T> MNEMO_FORMULA T logSoftmaxValue(T x, T rowMax, T logSum) {
  return x - rowMax - logSum;
}

} // namespace mnemo::softmax

#endif // MNEMO_LANG_OPS_SOFTMAX_SOFTMAXFORMULAS_H
