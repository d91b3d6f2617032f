//===- NormalizationFormulas.h - What normalization computes ----*- C++ -*-===//
//
// The per-element formulas of layernorm, rmsnorm and batch_norm and of
// their gradients, stated once. The reference interpreter evaluates them in
// double (NormalizationInterpreter.cpp), the CPU kernels
// (NormalizationKernels.h) and the CUDA kernels (NormalizationKernels.cuh, to
// which NVRTC gives this file by name) in f32. What differs between them is
// only how a row's sums are taken: in double on the host, by a block's
// reduction on the GPU.
//
// RMS normalization is layer normalization with the mean taken as 0 and no
// bias: the callers pass mean = 0, bias = 0 and meanDxhat = 0. Batch
// normalization is the same arithmetic over a channel's elements instead of
// a row's, with one scale a channel.
//
// It includes nothing but the formula macros: NVRTC compiles without a C++
// standard library.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONFORMULAS_H
#define MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONFORMULAS_H

#include "lang/ops/elementwise/ElementwiseFormulas.h"

namespace mnemo::normalization {

/// The normalized input, xhat = (x - mean) * rstd.
template <typename T> MNEMO_FORMULA T normalized(T x, T mean, T rstd) {
  return (x - mean) * rstd;
}

/// y = xhat * scale + bias.
template <typename T>
MNEMO_FORMULA T normalize(T x, T mean, T rstd, T scale, T bias) {
  return normalized(x, mean, rstd) * scale + bias;
}

/// The input's gradient, with dxhat = dy * scale summed over the row into
/// meanDxhat = mean(dxhat) and meanDxhatXhat = mean(dxhat * xhat):
/// dx = rstd * (dxhat - meanDxhat - xhat * meanDxhatXhat). (The scale's
/// gradient sums dy * xhat over the rows, the bias's dy.)
template <typename T>
MNEMO_FORMULA T normalizeInputGrad(T dy, T x, T scale, T mean, T rstd,
                                   T meanDxhat, T meanDxhatXhat) {
  return rstd *
         (dy * scale - meanDxhat - normalized(x, mean, rstd) * meanDxhatXhat);
}

} // namespace mnemo::normalization

#endif // MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONFORMULAS_H
