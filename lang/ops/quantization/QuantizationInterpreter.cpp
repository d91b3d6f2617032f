//===- QuantizationInterpreter.cpp - Quantization in the interpreter ------===//
//
// The interpreter's model of the quantization family, with its own rules
// (QuantizationReference.cpp, written from PyTorch's definitions), so the
// differential tests compare two implementations: observers and fake
// quantization element by element in f32, as PyTorch rounds; the int8
// product accumulated exactly in 64-bit integers; the compressed formats
// unpacked element by element.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/quantization/QuantizationReference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// A tensor's channels along `axis` (-1: one) and the elements after it.
std::pair<int64_t, int64_t> channelsOf(const Tensor &t, int64_t axis) {
  if (axis < 0)
    return {1, t.numElements()};
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < t.rank(); ++d)
    inner *= t.shape[d];
  return {t.shape[axis], inner};
}

LogicalResult interpretObserveMinMax(ObserveMinMaxOp op, OpContext &context) {
  const Tensor &x = context.get(op.getInput());
  auto [channels, inner] = channelsOf(x, op.getAxis());
  const Tensor &lo = context.get(op.getMin()), &hi = context.get(op.getMax());
  // The range each channel sees this step (NaNs are not seen, as with
  // PyTorch's aminmax on finite data).
  std::vector<float> seenLo(channels, std::numeric_limits<float>::infinity()),
      seenHi(channels, -std::numeric_limits<float>::infinity());
  for (int64_t e = 0; e < x.numElements(); ++e) {
    float v = float(x.data[e]);
    int64_t c = (e / inner) % channels;
    if (v < seenLo[c])
      seenLo[c] = v;
    if (v > seenHi[c])
      seenHi[c] = v;
  }
  bool firstStep = context.get(op.getStep()).data[0] <= 1;
  float averaging = float(op.getAveragingConstant().convertToDouble());
  Tensor outLo = context.like(op.getNewMin()),
         outHi = context.like(op.getNewMax());
  for (int64_t c = 0; c < channels; ++c) {
    outLo.data[c] = reference::observedBound(float(lo.data[c]), seenLo[c],
                                             firstStep, averaging, true);
    outHi.data[c] = reference::observedBound(float(hi.data[c]), seenHi[c],
                                             firstStep, averaging, false);
  }
  context.set(op.getNewMin(), std::move(outLo));
  return context.finish(op.getNewMax(), std::move(outHi));
}

/// fake_quant (no `grad`) and fake_quant_grad, which share their operands
/// but the gradient.
template <typename Op>
LogicalResult interpretFakeQuant(Op op, OpContext &context) {
  const Tensor *grad = nullptr;
  if constexpr (std::is_same_v<Op, FakeQuantGradOp>)
    grad = &context.get(op.getGrad());
  const Tensor &x = context.get(op.getInput());
  auto [channels, inner] = channelsOf(x, op.getAxis());
  const Tensor &lo = context.get(op.getMin()), &hi = context.get(op.getMax());
  int64_t qmin = op.getQuantMin(), qmax = op.getQuantMax();
  std::vector<reference::QuantParams> params;
  for (int64_t c = 0; c < channels; ++c)
    params.push_back(reference::quantParams(
        float(lo.data[c]), float(hi.data[c]), qmin, qmax, op.getSymmetric()));
  Tensor out = context.like(op.getResult());
  for (int64_t e = 0; e < x.numElements(); ++e) {
    const reference::QuantParams &q = params[(e / inner) % channels];
    float v = float(x.data[e]);
    if (grad)
      out.data[e] = reference::fakeQuantPasses(v, q, qmin, qmax)
                        ? float(grad->data[e])
                        : 0.0f;
    else
      out.data[e] = reference::fakeQuantize(v, q, qmin, qmax);
  }
  return context.finish(op.getResult(), std::move(out));
}

LogicalResult interpretQuantizeRows(QuantizeRowsOp op, OpContext &context) {
  const Tensor &x = context.get(op.getInput());
  auto [rows, k] = x.rowsAndDepth();
  Tensor codes = context.like(op.getCodes()),
         scale = context.like(op.getScale()), sum = context.like(op.getSum());
  for (int64_t m = 0; m < rows; ++m) {
    // A NaN or an infinity makes the row's scale infinite, so that each of
    // its outputs is NaN, as in f32.
    float absMax = 0.0f;
    for (int64_t c = 0; c < k; ++c) {
      double v = x.data[m * k + c];
      absMax = std::isfinite(v) ? std::max(absMax, std::fabs(float(v)))
                                : std::numeric_limits<float>::infinity();
    }
    float rowScale = reference::rowScale(absMax);
    int64_t total = 0;
    for (int64_t c = 0; c < k; ++c) {
      int code = reference::rowCode(float(x.data[m * k + c]), rowScale);
      codes.data[m * k + c] = code;
      total += code;
    }
    scale.data[m] = rowScale;
    sum.data[m] = double(total);
  }
  context.set(op.getCodes(), std::move(codes));
  context.set(op.getScale(), std::move(scale));
  return context.finish(op.getSum(), std::move(sum));
}

LogicalResult interpretMatmulInt8(MatmulInt8Op op, OpContext &context) {
  const Tensor &x = context.get(op.getLhs()), &w = context.get(op.getRhs());
  const Tensor &xs = context.get(op.getLhsScale()),
               &xsum = context.get(op.getLhsSum());
  const Tensor &ws = context.get(op.getRhsScale()),
               &wz = context.get(op.getRhsZeroPoint());
  auto [rows, k] = x.rowsAndDepth();
  int64_t n = w.shape[0];
  Tensor out = context.like(op.getResult());
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t c = 0; c < k; ++c)
        acc += int64_t(x.data[m * k + c]) * int64_t(w.data[j * k + c]);
      // The exact integer product less the weight's zero point times the
      // row's code sum, in units of both scales.
      int64_t centered = acc - int64_t(wz.data[j]) * int64_t(xsum.data[m]);
      out.data[m * n + j] =
          float(centered) * (float(xs.data[m]) * float(ws.data[j]));
    }
  return context.finish(op.getResult(), std::move(out));
}

LogicalResult interpretDequantize(DequantizeOp op, OpContext &context) {
  const Tensor &codes = context.get(op.getCodes());
  const Tensor &scale = context.get(op.getScale()),
               &zero = context.get(op.getZeroPoint());
  Tensor out = context.like(op.getResult());
  int64_t n = out.numElements(), inner = n / scale.numElements();
  std::vector<signed char> packed(codes.data.begin(), codes.data.end());
  for (int64_t e = 0; e < n; ++e) {
    int code = op.getBits() == 8 ? int(codes.data[e])
                                 : reference::int4Code(packed.data(), e);
    out.data[e] =
        float(code - int(zero.data[e / inner])) * float(scale.data[e / inner]);
  }
  return context.finish(op.getResult(), std::move(out));
}

/// The sparse products sum in double (the kernels' order differs).
LogicalResult interpretMatmulSparse24(MatmulSparse24Op op, OpContext &context) {
  const Tensor &x = context.get(op.getLhs()),
               &values = context.get(op.getValues());
  const Tensor &indices = context.get(op.getIndices());
  auto [rows, k] = x.rowsAndDepth();
  int64_t n = values.shape[0];
  std::vector<signed char> packed(indices.data.begin(), indices.data.end());
  Tensor out = context.like(op.getResult());
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t g = 0; g < k / 4; ++g)
        for (int kept = 0; kept < 2; ++kept) {
          int position =
              reference::sparse24Position(packed.data() + j * (k / 8), g, kept);
          acc += x.data[m * k + 4 * g + position] *
                 values.data[j * (k / 2) + 2 * g + kept];
        }
      out.data[m * n + j] = acc;
    }
  return context.finish(op.getResult(), std::move(out));
}

LogicalResult interpretMatmulCsr(MatmulCsrOp op, OpContext &context) {
  const Tensor &x = context.get(op.getLhs()),
               &values = context.get(op.getValues());
  const Tensor &columns = context.get(op.getColumns()),
               &offsets = context.get(op.getRowOffsets());
  auto [rows, k] = x.rowsAndDepth();
  int64_t n = offsets.numElements() - 1, capacity = values.numElements();
  for (int64_t j = 0; j <= n; ++j)
    if (offsets.data[j] < (j ? offsets.data[j - 1] : 0) ||
        offsets.data[j] > double(capacity))
      return context.fail(op, "row_offsets must rise from 0 to at most the " +
                                  std::to_string(capacity) +
                                  " stored nonzeros");
  for (int64_t e = 0; e < int64_t(offsets.data[n]); ++e)
    if (columns.data[e] < 0 || columns.data[e] >= double(k))
      return context.fail(
          op, "column " + std::to_string(int64_t(columns.data[e])) +
                  " is out of range for depth " + std::to_string(k));
  Tensor out = context.like(op.getResult());
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t e = int64_t(offsets.data[j]);
           e < int64_t(offsets.data[j + 1]); ++e)
        acc += x.data[m * k + int64_t(columns.data[e])] * values.data[e];
      out.data[m * n + j] = acc;
    }
  return context.finish(op.getResult(), std::move(out));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerQuantizationInterpreterModels(MLIRContext &context) {
  InterpreterFunction<ObserveMinMaxOp, interpretObserveMinMax>::attach(context);
  InterpreterFunction<FakeQuantOp, interpretFakeQuant<FakeQuantOp>>::attach(
      context);
  InterpreterFunction<FakeQuantGradOp,
                      interpretFakeQuant<FakeQuantGradOp>>::attach(context);
  InterpreterFunction<QuantizeRowsOp, interpretQuantizeRows>::attach(context);
  InterpreterFunction<MatmulInt8Op, interpretMatmulInt8>::attach(context);
  InterpreterFunction<DequantizeOp, interpretDequantize>::attach(context);
  InterpreterFunction<MatmulSparse24Op, interpretMatmulSparse24>::attach(
      context);
  InterpreterFunction<MatmulCsrOp, interpretMatmulCsr>::attach(context);
}
