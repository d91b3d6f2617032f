//===- SoftmaxOps.cpp - softmax's axis check and gradient rules -----------===//
//
// Both gradients are compositions that fuse into loops around one
// reduction: softmax's dx = y * (g - sum(g * y)), log-softmax's
// dx = g - exp(y) * sum(g), along the axis, from the output y (so the
// forward's input need not stay alive).
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/ShapeRules.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::gradient;

template <typename SoftmaxLikeOp>
static LogicalResult verifyAxis(SoftmaxLikeOp op) {
  int64_t rank = typeOf(op.getInput()).getRank();
  if (!shape::normalizeAxis(int64_t(op.getAxis()), rank))
    return op.emitOpError() << "axis " << int64_t(op.getAxis())
                            << " is out of range for rank " << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() { return verifyAxis(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifyAxis(*this); }

int64_t SoftmaxOp::getNormalizedAxis() {
  return *shape::normalizeAxis(getAxis(), typeOf(getInput()).getRank());
}
int64_t LogSoftmaxOp::getNormalizedAxis() {
  return *shape::normalizeAxis(getAxis(), typeOf(getInput()).getRank());
}

std::array<int64_t, 3> SoftmaxOp::getRowGeometry() {
  return shape::aroundAxis(typeOf(getInput()).getShape(), getNormalizedAxis());
}
std::array<int64_t, 3> LogSoftmaxOp::getRowGeometry() {
  return shape::aroundAxis(typeOf(getInput()).getShape(), getNormalizedAxis());
}

SmallVector<Value> SoftmaxOp::buildGradient(OpBuilder &b,
                                            ArrayRef<Value> grads) {
  Emitter e{b, getLoc()};
  // dx = y * (g - sum(g * y)) along the axis.
  Value y = getResult(), g = grads[0];
  Value dot =
      e.broadcast(e.sumKeep(e.mul(g, y), {getNormalizedAxis()}), typeOf(y));
  return {e.mul(y, e.sub(g, dot))};
}

SmallVector<Value> LogSoftmaxOp::buildGradient(OpBuilder &b,
                                               ArrayRef<Value> grads) {
  Emitter e{b, getLoc()};
  // dx = g - softmax(x) * sum(g) along the axis; softmax(x) = exp(y).
  Value y = getResult(), g = grads[0];
  Value total = e.broadcast(e.sumKeep(g, {getNormalizedAxis()}), typeOf(y));
  Value softmax = b.create<ExpOp>(getLoc(), y.getType(), y);
  return {e.sub(g, e.mul(softmax, total))};
}
