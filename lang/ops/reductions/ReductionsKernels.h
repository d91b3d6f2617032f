//===- ReductionsKernels.h - sum, mean and max on the CPU -------*- C++ -*-===//
//
// The CPU kernels generated code calls for mnemo.sum, mean, max and
// max_grad (the emission model, ReductionsEmission.cpp, includes this
// header). Their bodies are in ReductionsKernels.cpp, built into the
// trainer's runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_REDUCTIONS_REDUCTIONSKERNELS_H
#define MNEMO_LANG_OPS_REDUCTIONS_REDUCTIONSKERNELS_H

#include <cstdint>

namespace mnemo::cpu {

enum class ReduceKind { Sum, Mean, Max };

/// Reduces the axes set in `reducedMask` (bit i: axis i) of x[shape]. Sums
/// accumulate in double (runs of the last reduced dimension in f32 where
/// the axes are scattered); max propagates NaN, as torch.amax. T is float,
/// or bf16_t and f16_t (runtime/cpu/Half.h): 16-bit storage computed in
/// f32, as a grouped-query attention's key gradient is under --precision.
template <typename T>
void reduce(ReduceKind kind, const T *x, const int64_t *shape, int rank,
            uint32_t reducedMask, T *out);

/// The gradient of a max reduction, shared evenly among ties.
template <typename T>
void maxGrad(const T *grad, const T *x, const T *maximum, const int64_t *shape,
             int rank, uint32_t reducedMask, T *out);

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_REDUCTIONS_REDUCTIONSKERNELS_H
