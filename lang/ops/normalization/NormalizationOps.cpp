//===- NormalizationOps.cpp - Shape checks and gradient rules -------------===//
//
// layernorm and rmsnorm take a scale (and layernorm a bias) of the input's
// last dimension. Their gradients are one backward op each, which
// recomputes the rows' statistics from the input instead of saving them.
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;

LogicalResult LayerNormOp::verify() {
  return verifyResult(
      *this, shape::lastDimNorm(shapeOf(getInput()), shapeOf(getScale())));
}

LogicalResult RmsNormOp::verify() {
  return verifyResult(
      *this, shape::lastDimNorm(shapeOf(getInput()), shapeOf(getScale())));
}

SmallVector<Value> LayerNormOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value(), Value(), Value()};
  auto op = b.create<LayerNormGradOp>(
      getLoc(), getInput().getType(), getScale().getType(), getBias().getType(),
      grads[0], getInput(), getScale(), getEpsilonAttr());
  return {op.getInputGrad(), op.getScaleGrad(), op.getBiasGrad()};
}

SmallVector<Value> RmsNormOp::buildGradient(OpBuilder &b,
                                            ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value(), Value()};
  auto op = b.create<RmsNormGradOp>(getLoc(), getInput().getType(),
                                    getScale().getType(), grads[0], getInput(),
                                    getScale(), getEpsilonAttr());
  return {op.getInputGrad(), op.getScaleGrad()};
}
