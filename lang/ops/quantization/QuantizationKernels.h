//===- QuantizationKernels.h - Quantization on the CPU ----------*- C++ -*-===//
//
// The CPU kernels generated code calls for the quantization family (the
// emission model, QuantizationEmission.cpp, includes this header where a
// model uses them; their definitions are in QuantizationKernels.cpp, in the
// trainer's library). A tensor is read as [outer, channels, inner]: element
// e is in channel (e / inner) % channels (channels = 1 and inner = n for one
// range per tensor). The arithmetic is QuantizationFormulas.h's, shared
// with the CUDA kernels. Part of the runtime side of the family: plain
// C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONKERNELS_H
#define MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONKERNELS_H

#include "lang/ops/quantization/QuantizationFormulas.h"

#include <cstdint>

namespace mnemo::cpu {

/// `observe_minmax` and `fake_quant` / `fake_quant_grad` (grad non-null)
/// over [outer, channels, inner].
void observeMinMax(int64_t n, int64_t channels, int64_t inner, const float *x,
                   const float *lo, const float *hi, float *newLo, float *newHi,
                   int64_t step, float averaging);
void fakeQuantize(int64_t n, int64_t channels, int64_t inner, const float *x,
                  const float *grad, const float *lo, const float *hi, int qmin,
                  int qmax, bool symmetric, float *out);

/// Inference's int8 weights (mnemoc --mode=inference). `rows` x `k`
/// activations: `quantize_rows` gives each row int8 codes, a scale and the
/// codes' sum; `matmul_int8` multiplies them by an int8 weight [n, k] per
/// channel (int32 accumulation) into f32 [rows, n].
void quantizeRows(int64_t rows, int64_t k, const float *x, int8_t *codes,
                  float *scale, int32_t *sum);
void matmulInt8(int64_t rows, int64_t n, int64_t k, const int8_t *x,
                const float *xScale, const int32_t *xSum, const int8_t *w,
                const float *wScale, const int32_t *wZeroPoint, float *out);
/// `dequantize`: `n` elements in `channels` equal runs; bits 8 or 4.
void dequantize(int64_t n, int64_t channels, int bits, const int8_t *codes,
                const float *scale, const int32_t *zeroPoint, float *out);

/// x [rows, k] @ W^T with W [n, k] 2:4-packed (values [n, k/2], indices
/// [n, k/8]) or in CSR (columns i16 or i32); false, with reportError, on
/// CSR offsets or columns out of range.
/// The 2:4 and CSR products decompress this many output channels at a time
/// into their workspace (the ops declare it, QuantizationOps.cpp).
constexpr int64_t kSparseTileRows = 64;
void matmulSparse24(int64_t rows, int64_t n, int64_t k, const float *x,
                    const float *values, const int8_t *indices, float *scratch,
                    float *out);
void matmulCsr(int64_t rows, int64_t n, int64_t k, int64_t capacity,
               const float *x, const float *values, const int16_t *columns16,
               const int32_t *columns32, const int32_t *rowOffsets,
               float *scratch, float *out);

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONKERNELS_H
