//===- DataMovementKernels.h - Slices, concat, masks on the CPU -*- C++ -*-===//
//
// The CPU kernels generated code calls for slice, slice_grad, concat and
// causal_mask (the emission model, DataMovementEmission.cpp, includes this
// header): row copies of any element type, by bytes. Part of the runtime
// side of the family: plain C++17, no LLVM. Out of line
// (DataMovementKernels.cpp): an unrolled scan calls them at every time
// step, and inlined with their constant arguments, the LSTM's 1278 calls
// made most of its step's compile time.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_DATAMOVEMENT_DATAMOVEMENTKERNELS_H
#define MNEMO_LANG_OPS_DATAMOVEMENT_DATAMOVEMENTKERNELS_H

#include <cstdint>

namespace mnemo::cpu {

/// A [rows, cols] mask, 1 where col <= row + (cols - rows).
void causalMask(uint8_t *out, int64_t rows, int64_t cols);

/// [outer, axisIn, inner] -> [outer, count, inner] taking start + j * step,
/// or (grad) the reverse into zeros.
void sliceCopy(const void *in, void *out, int64_t elementBytes, int64_t outer,
               int64_t axisIn, int64_t inner, int64_t start, int64_t count,
               int64_t step, bool grad);

/// Copies [outer, n, inner] into [outer, axisOut, inner] at `offset`.
void concatPart(const void *in, void *out, int64_t elementBytes, int64_t outer,
                int64_t n, int64_t inner, int64_t axisOut, int64_t offset);

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_DATAMOVEMENT_DATAMOVEMENTKERNELS_H
