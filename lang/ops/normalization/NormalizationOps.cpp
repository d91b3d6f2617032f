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

namespace {
/// Chunks of at least 32 rows, at most 128 of them.
int64_t gradChunks(Value input) {
  return std::clamp<int64_t>(rowsAndDepth(input).first / 32, 1, 128);
}
/// Two f32 statistics a row (256-byte aligned), then [chunks][2][d]
/// partial column sums (NormalizationEmission.cpp).
int64_t gradScratchBytes(Value input, int64_t chunks) {
  auto [rows, d] = rowsAndDepth(input);
  return (rows * 8 + 255) / 256 * 256 + chunks * 2 * d * 4;
}
} // namespace

int64_t LayerNormGradOp::getCudaGradChunks() { return gradChunks(getInput()); }
int64_t RmsNormGradOp::getCudaGradChunks() { return gradChunks(getInput()); }
int64_t LayerNormGradOp::getCudaScratchBytes() {
  return gradScratchBytes(getInput(), getCudaGradChunks());
}
int64_t RmsNormGradOp::getCudaScratchBytes() {
  return gradScratchBytes(getInput(), getCudaGradChunks());
}
