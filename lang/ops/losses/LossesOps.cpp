//===- LossesOps.cpp - Shape checks and the gradient rule -----------------===//
//
// cross_entropy's gradient is one backward op, which recomputes each row's
// log-sum-exp from the logits instead of saving the probabilities; the
// targets get none. accuracy is a metric, not differentiated. mse's
// gradient is elementwise ops that fuse into one loop.
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::gradient;
using namespace mnemo::verification;

LogicalResult CrossEntropyOp::verify() {
  return verifyResult(
      *this, shape::crossEntropy(shapeOf(getLogits()), shapeOf(getTargets())));
}

SmallVector<Value> CrossEntropyOp::buildGradient(OpBuilder &b,
                                                 ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value(), Value()};
  return {b.create<CrossEntropyGradOp>(getLoc(), getLogits().getType(),
                                       grads[0], getLogits(), getTargets())
              .getResult(),
          Value()};
}

/// On the GPU each row's value (its loss, its hit) goes to scratch, then
/// one block averages them in a fixed order (LossesEmission.cpp).
static int64_t rowValueBytes(Value logits) {
  RankedTensorType type = tensorType(logits);
  int64_t classes = type.getRank() == 0 ? 1 : type.getShape().back();
  return type.getNumElements() / std::max<int64_t>(1, classes) * 4;
}
int64_t CrossEntropyOp::getCudaScratchBytes() {
  return rowValueBytes(getLogits());
}
int64_t AccuracyOp::getCudaScratchBytes() { return rowValueBytes(getLogits()); }

LogicalResult MseOp::verify() {
  return verifyResult(*this, shape::ShapeResult::success({}),
                      tensorType(getLhs()).getElementType());
}

SmallVector<Value> MseOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value(), Value()};
  Emitter e{b, getLoc()};
  // d/da mean((a - b)^2) = 2 (a - b) / N.
  double n = double(typeOf(getLhs()).getNumElements());
  Value da = e.mul(e.scale(e.sub(getLhs(), getRhs()), 2.0 / n),
                   e.spread(grads[0], getLhs()));
  return {da, e.neg(da)};
}

int64_t MseOp::getCudaBlocks() {
  // 256 elements a block at least, at most 1024 blocks (grid-stride).
  int64_t n = tensorType(getLhs()).getNumElements();
  return std::clamp<int64_t>((n + 255) / 256, 1, 1024);
}
int64_t MseOp::getCudaScratchBytes() { return getCudaBlocks() * 4; }
