//===- PoolingKernels.h - 2-D pooling on the CPU ----------------*- C++ -*-===//
//
// The CPU kernels generated code calls for the pooling ops (the emission
// model, PoolingEmission.cpp, includes this header). Their bodies are in
// PoolingKernels.cpp, built into the trainer's runtime: plain C++17, no
// LLVM. The windows' formulas are PoolingFormulas.h's.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_POOLING_POOLINGKERNELS_H
#define MNEMO_LANG_OPS_POOLING_POOLINGKERNELS_H

#include "lang/ops/pooling/PoolingFormulas.h"

namespace mnemo::cpu {

using pooling::PoolShape;

/// Max pooling propagates a NaN (as PyTorch's); its gradient goes to each
/// window's first maximum. Average pooling counts padding as zeros. T is
/// the storage (float, bf16_t, f16_t); the arithmetic is f32, and 16-bit
/// storage rounds each result once.
template <typename T> void maxPool2d(const PoolShape &s, const T *x, T *y);
template <typename T>
void maxPool2dGrad(const PoolShape &s, const T *dy, const T *x, T *dx);
template <typename T> void avgPool2d(const PoolShape &s, const T *x, T *y);
template <typename T>
void avgPool2dGrad(const PoolShape &s, const T *dy, T *dx);

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_POOLING_POOLINGKERNELS_H
