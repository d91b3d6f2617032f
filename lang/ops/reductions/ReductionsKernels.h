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

namespace mnemo {
namespace cpu {

enum class ReduceKind { Sum, Mean, Max };

/// Reduces the axes set in `reducedMask` (bit i: axis i) of x[shape]. Sums
/// accumulate in double (runs of the last reduced dimension in f32 where
/// the axes are scattered); max propagates NaN, as torch.amax.
void reduce(ReduceKind kind, const float *x, const int64_t *shape, int rank,
            uint32_t reducedMask, float *out);

/// The gradient of a max reduction, shared evenly among ties.
void maxGrad(const float *grad, const float *x, const float *maximum,
             const int64_t *shape, int rank, uint32_t reducedMask, float *out);

} // namespace cpu
} // namespace mnemo

#endif // MNEMO_LANG_OPS_REDUCTIONS_REDUCTIONSKERNELS_H
