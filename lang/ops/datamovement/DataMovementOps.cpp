//===- DataMovementOps.cpp - Shape checks, folders, gradients -------------===//
//
// A reshape of a reshape is one reshape, a transpose of a transpose one
// transpose, and identities fold away. The gradient of a view is the
// inverse view; a broadcast's sums over the dimensions it added or
// stretched.
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::gradient;
using namespace mnemo::verification;

static std::vector<int64_t> toVector(ArrayRef<int64_t> values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult BroadcastOp::fold(FoldAdaptor) {
  return getInput().getType() == getType() ? getInput() : OpFoldResult();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) is reshape(x): only the final shape matters.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i))
      return {};
  return getInput();
}

LogicalResult TransposeOp::canonicalize(TransposeOp op,
                                        PatternRewriter &rewriter) {
  auto inner = op.getInput().getDefiningOp<TransposeOp>();
  if (!inner)
    return failure();
  // outer[i] reads inner dimension perm[i], which reads input innerPerm[...].
  ArrayRef<int64_t> outerPerm = op.getPermutation();
  ArrayRef<int64_t> innerPerm = inner.getPermutation();
  SmallVector<int64_t> composed;
  for (int64_t p : outerPerm)
    composed.push_back(innerPerm[p]);
  rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(), inner.getInput(),
                                           composed);
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (failed(verifySameElementType(*this, {getInput(), getResult()})))
    return failure();
  return verifyResult(
      *this, shape::reshape(shapeOf(getInput()), shapeOf(getResult())));
}

LogicalResult TransposeOp::verify() {
  if (failed(verifySameElementType(*this, {getInput(), getResult()})))
    return failure();
  return verifyResult(
      *this, shape::transpose(shapeOf(getInput()), toVector(getPermutation())));
}

LogicalResult BroadcastOp::verify() {
  if (failed(verifySameElementType(*this, {getInput(), getResult()})))
    return failure();
  return verifyResult(
      *this, shape::broadcastTo(shapeOf(getInput()), shapeOf(getResult())));
}

SmallVector<Value> ReshapeOp::buildGradient(OpBuilder &b,
                                            ArrayRef<Value> grads) {
  if (!isFloatTensor(getInput()))
    return {Value()};
  Emitter e{b, getLoc()};
  return {e.reshape(grads[0], typeOf(getInput()))};
}

SmallVector<Value> TransposeOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  if (!isFloatTensor(getInput()))
    return {Value()};
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  return {
      b.create<TransposeOp>(getLoc(), getInput().getType(), grads[0], inverse)
          .getResult()};
}

SmallVector<Value> BroadcastOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  if (!isFloatTensor(getInput()))
    return {Value()};
  Emitter e{b, getLoc()};
  // Sum over the dimensions the broadcast added or stretched.
  auto in = typeOf(getInput()), out = typeOf(getResult());
  int64_t lead = out.getRank() - in.getRank();
  SmallVector<int64_t> axes, kept;
  for (int64_t i = 0; i < out.getRank(); ++i) {
    bool added = i < lead;
    bool stretched =
        !added && in.getDimSize(i - lead) == 1 && out.getDimSize(i) != 1;
    if (added || stretched)
      axes.push_back(i);
    else
      kept.push_back(out.getDimSize(i));
  }
  if (axes.empty())
    return {e.reshape(grads[0], in)};
  auto sumType = RankedTensorType::get(kept, in.getElementType());
  Value summed = b.create<SumOp>(getLoc(), sumType, grads[0], axes, false);
  return {e.reshape(summed, in)};
}

LogicalResult SliceOp::verify() {
  if (failed(verifySameElementType(*this, {getInput(), getResult()})))
    return failure();
  shape::Shape in = shapeOf(getInput());
  auto axis = shape::normalizeAxis(int64_t(getAxis()), in.size());
  if (!axis)
    return emitOpError() << "axis " << int64_t(getAxis()) << " is out of range";
  // I64Attr getters return uint64_t; the attributes hold signed values.
  int64_t start = getStart(), end = getEnd(), step = getStep();
  if (start < 0 || start >= end || end > in[*axis])
    return emitOpError() << "needs 0 <= start < end <= " << in[*axis]
                         << ", not " << start << ":" << end;
  return verifyResult(*this, shape::slice(in, *axis, start, end, step));
}

LogicalResult SliceGradOp::verify() {
  shape::Shape in = shapeOf(getResult());
  auto axis = shape::normalizeAxis(int64_t(getAxis()), in.size());
  int64_t start = getStart(), end = getEnd(), step = getStep();
  if (!axis || start < 0 || start >= end || end > in[*axis])
    return emitOpError("the slice does not fit the result");
  shape::ShapeResult forward = shape::slice(in, *axis, start, end, step);
  if (!forward.ok() || forward.shape != shapeOf(getGrad()))
    return emitOpError("the gradient's shape is not the slice's shape");
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  SmallVector<Value> all(getInputs().begin(), getInputs().end());
  all.push_back(getResult());
  if (failed(verifySameElementType(*this, all)))
    return failure();
  std::vector<shape::Shape> shapes;
  for (Value v : getInputs())
    shapes.push_back(shapeOf(v));
  return verifyResult(*this, shape::concat(shapes, int64_t(getAxis())));
}

LogicalResult CausalMaskOp::verify() {
  if (tensorType(getResult()).getRank() != 2)
    return emitOpError("the mask must have rank 2");
  return success();
}

namespace {
/// `big` (the sliced tensor) as [outer, axis, inner] and the slice in it.
template <typename Op>
std::array<int64_t, 6> sliceGeometry(Op op, Value big, Value small) {
  ArrayRef<int64_t> b = tensorType(big).getShape();
  int64_t axis = *shape::normalizeAxis(int64_t(op.getAxis()), b.size());
  auto [outer, extent, inner] = shape::aroundAxis(b, axis);
  return {outer,
          extent,
          inner,
          int64_t(op.getStart()),
          tensorType(small).getDimSize(axis),
          int64_t(op.getStep())};
}
} // namespace

std::array<int64_t, 6> SliceOp::getSliceGeometry() {
  return sliceGeometry(*this, getInput(), getResult());
}
std::array<int64_t, 6> SliceGradOp::getSliceGeometry() {
  return sliceGeometry(*this, getResult(), getGrad());
}

SmallVector<Value> SliceOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!isFloatTensor(getInput()))
    return {Value()};
  return {b.create<SliceGradOp>(getLoc(), getInput().getType(), grads[0],
                                getAxisAttr(), getStartAttr(), getEndAttr(),
                                getStepAttr())
              .getResult()};
}

// slice_grad is also `pad`'s forward (the frontend places a tensor in
// zeros with it), so it has a gradient of its own: the slice back out.
SmallVector<Value> SliceGradOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  return {b.create<SliceOp>(getLoc(), getGrad().getType(), grads[0],
                            getAxisAttr(), getStartAttr(), getEndAttr(),
                            getStepAttr())
              .getResult()};
}

SmallVector<Value> ConcatOp::buildGradient(OpBuilder &b,
                                           ArrayRef<Value> grads) {
  SmallVector<Value> result(getInputs().size());
  if (!isFloatTensor(getResult()))
    return result;
  int64_t axis = int64_t(getAxis());
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = typeOf(input).getDimSize(axis);
    result[i] = b.create<SliceOp>(getLoc(), input.getType(), grads[0], axis,
                                  offset, offset + size, 1);
    offset += size;
  }
  return result;
}
