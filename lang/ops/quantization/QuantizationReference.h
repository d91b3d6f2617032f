//===- QuantizationReference.h - Reference quantization rules -*- C++ -*-===//
//
// The reference for quantization-aware training (observe_minmax,
// fake_quant, fake_quant_grad), inference's compressed weights
// (quantize_rows, matmul_int8, dequantize, matmul_sparse24) and adamw8bit's
// block-wise 8-bit state, written from PyTorch's and bitsandbytes'
// definitions independently of the trainer's kernels
// (QuantizationFormulas.h, lang/ops/optimizers/OptimizersKernels.h), so the
// differential tests compare two implementations. What they share is data: the
// values of the 8-bit codes (lang/ops/optimizers/OptimizersFormulas.h) and the
// packing of the formats.
//
// Everything here is f32 arithmetic, as PyTorch's kernels compute it:
// rounding is discontinuous, so the reference must round where they do.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONREFERENCE_H
#define MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONREFERENCE_H

#include <cstdint>

namespace mnemo::reference {

/// torch.ao.quantization's _calculate_qparams for an observed range.
struct QuantParams {
  float scale;
  float zeroPoint; ///< an integer
};
QuantParams quantParams(float lo, float hi, int64_t qmin, int64_t qmax,
                        bool symmetric);

/// fake_quantize_per_{tensor,channel}_affine: `x` through [qmin, qmax].
float fakeQuantize(float x, QuantParams q, int64_t qmin, int64_t qmax);
/// Its straight-through gradient's mask: whether `x`'s code is in range.
bool fakeQuantPasses(float x, QuantParams q, int64_t qmin, int64_t qmax);

/// MinMaxObserver (averaging 0) and MovingAverageMinMaxObserver: a bound
/// after seeing `seen`.
float observedBound(float old, float seen, bool firstStep, float averaging,
                    bool lower);

/// quantize_rows: a row's scale from its largest magnitude, and a code.
float rowScale(float absMax);
int rowCode(float x, float scale);

/// The stored code of element `e` of a packed int4 tensor (two per byte,
/// the low nibble first, two's complement).
int int4Code(const signed char *packed, int64_t e);
/// The position (0..3) in its group of the `kept`-th value of 2:4 group
/// `group`, from its row's packed indices (two 2-bit positions per group,
/// two groups per byte, the low nibble first).
int sparse24Position(const signed char *rowIndices, int64_t group, int kept);

/// adamw8bit's state: the 8-bit code nearest to `x` (a value divided by
/// its block's maximum), a tie to the smaller magnitude, and a code's
/// value.
uint8_t nearestCode(float x, bool isSigned);
float codeValue(uint8_t code, bool isSigned);

} // namespace mnemo::reference

#endif // MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONREFERENCE_H
