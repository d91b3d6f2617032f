//===- NormalizationOps.cpp - Shape checks and gradient rules -------------===//
//
// layernorm and rmsnorm take a scale (and layernorm a bias) of the input's
// last dimension. Their gradients are one backward op each, which
// recomputes the rows' statistics from the input instead of saving them.
// batch_norm normalizes each channel (dim 1) over the batch and the
// spatial dimensions; its statistics are results, [C] each, which its
// backward op reads (a few bytes a channel, as PyTorch's save_mean and
// save_invstd), and from which batch_norm_apply recomputes its output.
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

/// batch_norm's and batch_norm_grad's per-channel operands are [C] and
/// the statistics f32.
static LogicalResult verifyChannelOperands(Operation *op, Value input,
                                           ValueRange channels,
                                           ValueRange statistics) {
  for (Value v : channels)
    if (failed(
            verifyResult(op, shape::channelNorm(shapeOf(input), shapeOf(v)))))
      return failure();
  for (Value v : statistics)
    if (!tensorType(v).getElementType().isF32())
      return op->emitOpError("the channels' statistics must be f32, not ")
             << v.getType();
  return success();
}

LogicalResult BatchNormOp::verify() {
  return verifyChannelOperands(*this, getInput(),
                               {getScale(), getMean(), getVariance()},
                               {getMean(), getVariance()});
}

LogicalResult BatchNormApplyOp::verify() {
  return verifyChannelOperands(*this, getInput(),
                               {getScale(), getMean(), getVariance()},
                               {getMean(), getVariance()});
}

LogicalResult BatchNormGradOp::verify() {
  return verifyChannelOperands(*this, getInput(),
                               {getScale(), getMean(), getVariance()},
                               {getMean(), getVariance()});
}

SmallVector<Value> BatchNormOp::getFirstResultRecomputationOperands() {
  return {getInput(), getScale(), getBias(), getMean(), getVariance()};
}

Value BatchNormOp::buildFirstResultRecomputation(OpBuilder &b,
                                                 ValueRange operands) {
  return b
      .create<BatchNormApplyOp>(getLoc(), getType(0), operands[0], operands[1],
                                operands[2], operands[3], operands[4],
                                getEpsilonAttr())
      .getResult();
}

int64_t BatchNormOp::getFirstResultRecomputationFlops() {
  return BatchNormApplyOp::flopsFor(getInput().getType());
}

SmallVector<Value> BatchNormOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  Value dx, dscale, dbias;
  if (grads[0]) {
    auto op = b.create<BatchNormGradOp>(
        getLoc(), getInput().getType(), getScale().getType(),
        getBias().getType(), grads[0], getInput(), getScale(), getMean(),
        getVariance(), getEpsilonAttr());
    dx = op.getInputGrad();
    dscale = op.getScaleGrad();
    dbias = op.getBiasGrad();
  }
  // Through the statistics themselves (a loss that reads them): with M
  // elements a channel, d mean / dx = 1/M and d var / dx = 2 (x - mean)/M.
  if (grads[1] || grads[2]) {
    gradient::Emitter e{b, getLoc()};
    auto inputType = gradient::typeOf(getInput());
    SmallVector<int64_t> axes{0};
    for (int64_t d = 2; d < inputType.getRank(); ++d)
      axes.push_back(d);
    double perChannel =
        double(inputType.getNumElements()) / double(inputType.getDimSize(1));
    auto channelwise = [&](Value v) {
      if (v.getType() != getInput().getType() &&
          gradient::typeOf(v).getElementType() != inputType.getElementType())
        v = b.create<CastOp>(
            getLoc(),
            RankedTensorType::get(gradient::typeOf(v).getShape(),
                                  inputType.getElementType()),
            v);
      return e.unreduce(v, inputType, axes);
    };
    auto accumulate = [&](Value term) { dx = dx ? e.add(dx, term) : term; };
    if (grads[1])
      accumulate(e.scale(channelwise(grads[1]), 1.0 / perChannel));
    if (grads[2])
      accumulate(e.mul(channelwise(grads[2]),
                       e.scale(e.sub(getInput(), channelwise(getMean())),
                               2.0 / perChannel)));
  }
  return {dx, dscale, dbias};
}

SmallVector<Value> LayerNormOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  auto op = b.create<LayerNormGradOp>(
      getLoc(), getInput().getType(), getScale().getType(), getBias().getType(),
      grads[0], getInput(), getScale(), getEpsilonAttr());
  return {op.getInputGrad(), op.getScaleGrad(), op.getBiasGrad()};
}

SmallVector<Value> RmsNormOp::buildGradient(OpBuilder &b,
                                            ArrayRef<Value> grads) {
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
