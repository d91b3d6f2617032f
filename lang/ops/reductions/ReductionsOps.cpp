//===- ReductionsOps.cpp - Shape checks, gradients, CUDA scratch ----------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"

#include <algorithm>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::gradient;

namespace {

/// Bit d set for each reduced axis d of a rank-`rank` input.
uint32_t maskOf(ArrayRef<int64_t> axes, int64_t rank) {
  uint32_t mask = 0;
  for (int64_t a : axes)
    mask |= 1u << (a < 0 ? a + rank : a);
  return mask;
}

template <typename ReduceOp> LogicalResult verifyReduce(ReduceOp op) {
  shape::Shape axes(op.getAxes().begin(), op.getAxes().end());
  return verification::verifyResult(
      op,
      shape::reduce(verification::shapeOf(op.getInput()), axes,
                    op.getKeepDims()),
      verification::tensorType(op.getInput()).getElementType());
}

/// Blocks that keep every SM of an H100 or H200 (132) busy, two each.
constexpr int64_t kFillBlocks = 264;

template <typename ReduceOp> int64_t columnChunks(ReduceOp op) {
  ArrayRef<int64_t> in = typeOf(op.getInput()).getShape();
  uint32_t mask = op.getReducedMask();
  int64_t rank = int64_t(in.size()), outputs = 1, perOutput = 1;
  for (int64_t d = 0; d < rank; ++d)
    ((mask >> d) & 1 ? perOutput : outputs) *= in[d];
  // The innermost dimension kept (outputs contiguous in the input), with
  // enough rows to split: column tiles of 32 by chunks of rows, as many
  // chunks as fill the GPU, each of at least 32 rows.
  bool innerKept = rank > 0 && !((mask >> (rank - 1)) & 1) && in.back() != 1;
  if (!innerKept || perOutput < 64)
    return 0;
  int64_t tiles = (outputs + 31) / 32;
  return std::clamp<int64_t>((kFillBlocks + tiles - 1) / tiles, 1,
                             std::min<int64_t>(1024, perOutput / 32));
}

template <typename ReduceOp> int64_t columnScratchBytes(ReduceOp op) {
  // [chunks][outputs] partial results in f32.
  return op.getCudaColumnChunks() * typeOf(op.getResult()).getNumElements() * 4;
}

} // namespace

#define MNEMO_REDUCE_OP_METHODS(Op)                                            \
  LogicalResult Op::verify() { return verifyReduce(*this); }                   \
  uint32_t Op::getReducedMask() {                                              \
    return maskOf(getAxes(), typeOf(getInput()).getRank());                    \
  }                                                                            \
  int64_t Op::getCudaColumnChunks() { return columnChunks(*this); }            \
  int64_t Op::getCudaScratchBytes() { return columnScratchBytes(*this); }
MNEMO_REDUCE_OP_METHODS(SumOp)
MNEMO_REDUCE_OP_METHODS(MeanOp)
MNEMO_REDUCE_OP_METHODS(MaxOp)
#undef MNEMO_REDUCE_OP_METHODS

uint32_t MaxGradOp::getReducedMask() {
  return maskOf(getAxes(), typeOf(getInput()).getRank());
}

LogicalResult MaxGradOp::verify() {
  // The incoming gradient and the forward's maximum have the max's shape.
  shape::Shape axes(getAxes().begin(), getAxes().end());
  shape::ShapeResult reduced =
      shape::reduce(verification::shapeOf(getInput()), axes, getKeepDims());
  if (!reduced.ok())
    return emitOpError() << reduced.error;
  for (Value v : {getGrad(), getMaximum()})
    if (verification::shapeOf(v) != reduced.shape)
      return emitOpError() << "expects the gradient and the maximum to have "
                              "the reduced shape of the input";
  return success();
}

SmallVector<Value> SumOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  Emitter e{b, getLoc()};
  return {e.unreduce(grads[0], typeOf(getInput()), getAxes())};
}

SmallVector<Value> MeanOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  Emitter e{b, getLoc()};
  int64_t count = typeOf(getInput()).getNumElements() /
                  typeOf(getResult()).getNumElements();
  return {e.scale(e.unreduce(grads[0], typeOf(getInput()), getAxes()),
                  1.0 / count)};
}

SmallVector<Value> MaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  return {b.create<MaxGradOp>(getLoc(), getInput().getType(), grads[0],
                              getInput(), getResult(), getAxesAttr(),
                              getKeepDimsAttr())
              .getResult()};
}
