//===- LogSumExpOps.cpp - logsumexp's shape check and gradient rule -------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::gradient;

int64_t LogSumExpOp::getReducedAxis() {
  return *shape::normalizeAxis(int64_t(getAxis()),
                               typeOf(getInput()).getRank());
}

std::array<int64_t, 3> LogSumExpOp::getRowGeometry() {
  return shape::aroundAxis(typeOf(getInput()).getShape(), getReducedAxis());
}

LogicalResult LogSumExpOp::verify() {
  RankedTensorType in = typeOf(getInput());
  if (!shape::normalizeAxis(int64_t(getAxis()), in.getRank()))
    return emitOpError() << "axis " << int64_t(getAxis())
                         << " is out of range for rank " << in.getRank();
  return verification::verifyResult(*this,
                                    shape::reduce(shape::Shape(in.getShape()),
                                                  {int64_t(getAxis())},
                                                  getKeepDims()),
                                    in.getElementType());
}

SmallVector<Value> LogSumExpOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  // d/dx logsumexp(x) = exp(x - logsumexp(x)), the softmax along the axis;
  // the three elementwise ops fuse into one loop over the input.
  Emitter e{b, getLoc()};
  RankedTensorType in = typeOf(getInput());
  int64_t axis = getReducedAxis();
  Value spreadGrad = e.unreduce(grads[0], in, {axis});
  Value spreadResult = e.unreduce(getResult(), in, {axis});
  Value softmax =
      b.create<ExpOp>(getLoc(), in, e.sub(getInput(), spreadResult));
  return {e.mul(spreadGrad, softmax)};
}
