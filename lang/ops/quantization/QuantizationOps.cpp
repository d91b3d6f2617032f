//===- QuantizationOps.cpp - Checks and fake_quant's gradient -------------===//
//
// Ranges are one [C] tensor per bound, C the channels along `axis` (1 for
// the whole tensor); the int8 ops' row scales and sums have one element per
// row of a [..., K] operand; the sparse products declare the CPU
// workspace their decompressed tiles take. fake_quant's gradient is the
// straight-through estimator clipped to the range (fake_quant_grad); the
// observed range gets none, as with PyTorch's FakeQuantize without a
// learned scale.
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"
#include "lang/ops/quantization/QuantizationKernels.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;

namespace {

/// The range tensors of an observer or fake_quant on `input` per `axis`.
LogicalResult verifyRange(Operation *op, Value input, Value range,
                          int64_t axis) {
  auto type = tensorType(input);
  if (axis < -1 || axis >= type.getRank())
    return op->emitOpError() << "axis " << axis << " is out of range for "
                             << type << " (-1: the whole tensor)";
  int64_t channels = axis < 0 ? 1 : type.getDimSize(axis);
  if (tensorType(range).getDimSize(0) != channels)
    return op->emitOpError() << "the range must have " << channels
                             << " element(s), one per channel";
  return success();
}

} // namespace

LogicalResult ObserveMinMaxOp::verify() {
  if (getAveragingConstant().convertToDouble() < 0 ||
      getAveragingConstant().convertToDouble() > 1)
    return emitOpError("averaging_constant must lie in [0, 1]");
  return verifyRange(*this, getInput(), getMin(), getAxis());
}

LogicalResult FakeQuantOp::verify() {
  if (int64_t(getQuantMin()) >= int64_t(getQuantMax()))
    return emitOpError("quant_min must be below quant_max");
  return verifyRange(*this, getInput(), getMin(), getAxis());
}

SmallVector<Value> FakeQuantOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  // The straight-through estimator, clipped to the range; the observed
  // range gets no gradient (PyTorch's FakeQuantize, without learned scale).
  return {b.create<FakeQuantGradOp>(getLoc(), getInput().getType(), grads[0],
                                    getInput(), getMin(), getMax(),
                                    getAxisAttr(), getQuantMinAttr(),
                                    getQuantMaxAttr(), getSymmetricAttr())
              .getResult(),
          Value(), Value()};
}

LogicalResult QuantizeRowsOp::verify() {
  auto [rows, k] = rowsAndDepth(getInput());
  if (tensorType(getCodes()).getShape() != tensorType(getInput()).getShape())
    return emitOpError("the codes must have the input's shape");
  if (tensorType(getScale()).getDimSize(0) != rows ||
      tensorType(getSum()).getDimSize(0) != rows)
    return emitOpError() << "the scales and sums must have one element per "
                            "row ("
                         << rows << ")";
  return success();
}

LogicalResult MatmulInt8Op::verify() {
  auto [rows, k] = rowsAndDepth(getLhs());
  auto weight = tensorType(getRhs());
  int64_t n = weight.getDimSize(0);
  if (weight.getDimSize(1) != k)
    return emitOpError() << "the weight " << weight << " must have " << k
                         << " columns, the activations' last dimension";
  if (tensorType(getLhsScale()).getDimSize(0) != rows ||
      tensorType(getLhsSum()).getDimSize(0) != rows)
    return emitOpError() << "lhs_scale and lhs_sum must have one element per "
                            "row ("
                         << rows << ")";
  if (tensorType(getRhsScale()).getDimSize(0) != n ||
      tensorType(getRhsZeroPoint()).getDimSize(0) != n)
    return emitOpError() << "rhs_scale and rhs_zero_point must have one "
                            "element per output channel ("
                         << n << ")";
  return verifyRowProduct(*this, getLhs(), getResult(), n);
}

LogicalResult DequantizeOp::verify() {
  int64_t bits = int64_t(getBits());
  if (bits != 8 && bits != 4)
    return emitOpError() << "bits must be 8 or 4, not " << bits;
  int64_t n = tensorType(getResult()).getNumElements();
  int64_t codes = tensorType(getCodes()).getNumElements();
  if (codes != (bits == 8 ? n : (n + 1) / 2))
    return emitOpError() << n << " elements at " << bits << " bits need "
                         << (bits == 8 ? n : (n + 1) / 2) << " code bytes, not "
                         << codes;
  int64_t channels = tensorType(getScale()).getDimSize(0);
  if (tensorType(getZeroPoint()).getDimSize(0) != channels || channels == 0 ||
      n % channels)
    return emitOpError() << "the " << channels
                         << " scales and zero points must divide the " << n
                         << " elements into equal channels";
  return success();
}

LogicalResult MatmulSparse24Op::verify() {
  auto [rows, k] = rowsAndDepth(getLhs());
  auto values = tensorType(getValues()), indices = tensorType(getIndices());
  int64_t n = values.getDimSize(0);
  if (k % 8 || values.getDimSize(1) != k / 2 || indices.getDimSize(0) != n ||
      indices.getDimSize(1) != k / 8)
    return emitOpError() << "a 2:4 weight of depth " << k
                         << " (a multiple of 8) packs into values [N, " << k / 2
                         << "] and indices [N, " << k / 8 << "], not " << values
                         << " and " << indices;
  return verifyRowProduct(*this, getLhs(), getResult(), n);
}

LogicalResult MatmulCsrOp::verify() {
  auto [rows, k] = rowsAndDepth(getLhs());
  if (tensorType(getValues()).getDimSize(0) !=
      tensorType(getColumns()).getDimSize(0))
    return emitOpError("values and columns must have the same capacity");
  if (tensorType(getColumns()).getElementType().isInteger(16) && k > 32767)
    return emitOpError() << "i16 columns cannot index a depth of " << k;
  int64_t n = tensorType(getRowOffsets()).getDimSize(0) - 1;
  if (n < 1)
    return emitOpError("row_offsets needs N + 1 >= 2 elements");
  return verifyRowProduct(*this, getLhs(), getResult(), n);
}

// The CPU's 2:4 and CSR products decompress tiles of kSparseTileRows
// output channels (QuantizationKernels.h) into f32 rows of depth K.
namespace {
int64_t sparseTileBytes(Value lhs, Value result) {
  return 4 *
         std::min<int64_t>(tensorType(result).getShape().back(),
                           cpu::kSparseTileRows) *
         tensorType(lhs).getShape().back();
}
} // namespace

/// cuBLASLt's workspace on the GPU.
int64_t MatmulInt8Op::getCudaScratchBytes() {
  return kCudaLibraryWorkspaceBytes;
}

int64_t MatmulSparse24Op::getCpuWorkspaceBytes() {
  return sparseTileBytes(getLhs(), getResult());
}

int64_t MatmulCsrOp::getCpuWorkspaceBytes() {
  return sparseTileBytes(getLhs(), getResult());
}
