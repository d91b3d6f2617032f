//===- PoolingOps.cpp - Shape checks, gradient rules, geometry ------------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;

namespace {

shape::Shape toShape(ArrayRef<int64_t> values) {
  return shape::Shape(values.begin(), values.end());
}

template <typename PoolOp> LogicalResult verifyPool(PoolOp op) {
  return verifyResult(
      op,
      shape::pool2d(shapeOf(op.getInput()), toShape(op.getKernel()),
                    toShape(op.getStride()), toShape(op.getPadding())),
      tensorType(op.getInput()).getElementType());
}

template <typename PoolGradOp> LogicalResult verifyPoolGrad(PoolGradOp op) {
  shape::ShapeResult forward =
      shape::pool2d(shapeOf(op.getResult()), toShape(op.getKernel()),
                    toShape(op.getStride()), toShape(op.getPadding()));
  if (!forward.ok() || forward.shape != shapeOf(op.getGrad()))
    return op.emitOpError("the gradient's shape is not the pooled shape of "
                          "the result");
  return success();
}

/// x [N,C,H,W] pooled to y [N,C,HO,WO] with the op's windows.
template <typename PoolOp>
std::array<int64_t, 11> geometry(PoolOp op, Value input, Value pooled) {
  ArrayRef<int64_t> x = tensorType(input).getShape(),
                    y = tensorType(pooled).getShape(), k = op.getKernel(),
                    s = op.getStride(), p = op.getPadding();
  return {x[0] * x[1], x[2], x[3], y[2], y[3], k[0],
          k[1],        s[0], s[1], p[0], p[1]};
}

} // namespace

LogicalResult MaxPool2DOp::verify() { return verifyPool(*this); }
LogicalResult AvgPool2DOp::verify() { return verifyPool(*this); }
LogicalResult MaxPool2DGradOp::verify() { return verifyPoolGrad(*this); }
LogicalResult AvgPool2DGradOp::verify() { return verifyPoolGrad(*this); }

std::array<int64_t, 11> MaxPool2DOp::getPoolGeometry() {
  return geometry(*this, getInput(), getResult());
}
std::array<int64_t, 11> AvgPool2DOp::getPoolGeometry() {
  return geometry(*this, getInput(), getResult());
}
std::array<int64_t, 11> MaxPool2DGradOp::getPoolGeometry() {
  return geometry(*this, getResult(), getGrad());
}
std::array<int64_t, 11> AvgPool2DGradOp::getPoolGeometry() {
  return geometry(*this, getResult(), getGrad());
}

SmallVector<Value> MaxPool2DOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  return {b.create<MaxPool2DGradOp>(getLoc(), getInput().getType(), grads[0],
                                    getInput(), getKernelAttr(),
                                    getStrideAttr(), getPaddingAttr())
              .getResult()};
}

SmallVector<Value> AvgPool2DOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  return {b.create<AvgPool2DGradOp>(getLoc(), getInput().getType(), grads[0],
                                    getKernelAttr(), getStrideAttr(),
                                    getPaddingAttr())
              .getResult()};
}
