//===- LossesOps.cpp - Shape checks, gradient rules and workspaces --------===//
//
// cross_entropy's gradient is one backward op, which recomputes each row's
// log-sum-exp from the logits instead of saving the probabilities; the
// targets get none. linear_cross_entropy's is one op too, which recomputes
// each chunk's logits from the saved log-sum-exp; its CPU kernels work in
// the plan's workspace (a tile of logits, and f32 copies of a block of a
// 16-bit weight and a chunk of hidden rows; LossesKernels.h's
// classifierWorkspaceFloats). The training step merges the two into
// linear_cross_entropy_with_grad where it can (FuseClassifierGradient.cpp),
// whose workspace adds each row's loss term. accuracy is a metric, not
// differentiated. mse's gradient is elementwise ops that fuse into one
// loop.
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"
#include "lang/ops/losses/LossesKernels.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::gradient;
using namespace mnemo::verification;

namespace {
LogicalResult verifySmoothing(Operation *op, double labelSmoothing) {
  if (!(labelSmoothing >= 0 && labelSmoothing <= 1))
    return op->emitOpError() << "label_smoothing must be in [0, 1]";
  return success();
}
} // namespace

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifySmoothing(*this, getLabelSmoothing().convertToDouble())))
    return failure();
  return verifyResult(
      *this, shape::crossEntropy(shapeOf(getLogits()), shapeOf(getTargets())));
}

SmallVector<Value> CrossEntropyOp::buildGradient(OpBuilder &b,
                                                 ArrayRef<Value> grads) {
  return {b.create<CrossEntropyGradOp>(getLoc(), getLogits().getType(),
                                       grads[0], getLogits(), getTargets(),
                                       getIgnoreIndex(), getLabelSmoothing())
              .getResult(),
          Value()};
}

/// The GPU counts the rows that take part (targets not ignore_index)
/// before scaling the gradient by their inverse.
int64_t CrossEntropyGradOp::getCudaScratchBytes() { return 256; }

//===----------------------------------------------------------------------===//
// linear_cross_entropy
//===----------------------------------------------------------------------===//

namespace {

/// The problem's sizes: rows of hidden states, their width, the classes.
losses::ClassifierGeometry classifierGeometry(Value hidden, Value weight,
                                              Value bias, bool transposeWeight,
                                              int64_t chunkRows) {
  ArrayRef<int64_t> h = tensorType(hidden).getShape(),
                    w = tensorType(weight).getShape();
  losses::ClassifierGeometry g;
  g.dim = h.back();
  g.rows = tensorType(hidden).getNumElements() / std::max<int64_t>(1, g.dim);
  g.classes = w.size() == 2 ? w[transposeWeight ? 0 : 1] : 0;
  // A chunk never holds more than every row (the kernels size their
  // tiles by it).
  g.chunkRows = std::max<int64_t>(1, std::min(chunkRows, g.rows));
  g.halfOperands = !tensorType(hidden).getElementType().isF32();
  g.bias = bool(bias);
  return g;
}

LogicalResult verifyClassifier(Operation *op, Value hidden, Value weight,
                               Value bias, Value targets, Value logSumExp,
                               bool transposeWeight, int64_t chunkRows,
                               double labelSmoothing) {
  shape::Shape h = shapeOf(hidden), w = shapeOf(weight);
  if (h.empty())
    return op->emitOpError() << "the hidden states must have a feature "
                                "dimension";
  if (w.size() != 2 || w[transposeWeight ? 1 : 0] != h.back())
    return op->emitOpError()
           << "the weight " << shape::format(w) << " must be "
           << (transposeWeight ? "[classes, " : "[") << h.back()
           << (transposeWeight ? "]" : ", classes]") << " for hidden states "
           << shape::format(h);
  shape::Shape rows(h.begin(), h.end() - 1);
  if (shapeOf(targets) != rows || (logSumExp && shapeOf(logSumExp) != rows))
    return op->emitOpError()
           << "the targets and the log-sum-exp must be " << shape::format(rows);
  int64_t classes = w[transposeWeight ? 0 : 1];
  if (bias && shapeOf(bias) != shape::Shape{classes})
    return op->emitOpError() << "the bias " << shape::format(shapeOf(bias))
                             << " must be [" << classes << "]";
  if (failed(verifySameElementType(op, {hidden, weight})) ||
      (bias && failed(verifySameElementType(op, {hidden, bias}))))
    return failure();
  if (chunkRows < 1)
    return op->emitOpError() << "chunk_rows must be positive";
  return verifySmoothing(op, labelSmoothing);
}

/// The gradients of the hidden states, the weight and the (optional) bias
/// have their types.
template <typename Op> LogicalResult verifyGradientTypes(Op op) {
  if (op.getHiddenGrad().getType() != op.getHidden().getType() ||
      op.getWeightGrad().getType() != op.getWeight().getType() ||
      bool(op.getBias()) != bool(op.getBiasGrad()) ||
      (op.getBias() && op.getBiasGrad().getType() != op.getBias().getType()))
    return op.emitOpError() << "the gradients must have the hidden states', "
                               "weight's and bias's types";
  return success();
}

} // namespace

LogicalResult LinearCrossEntropyOp::verify() {
  return verifyClassifier(*this, getHidden(), getWeight(), getBias(),
                          getTargets(), getLogSumExp(), getTransposeWeight(),
                          getChunkRows(),
                          getLabelSmoothing().convertToDouble());
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (failed(verifyClassifier(*this, getHidden(), getWeight(), getBias(),
                              getTargets(), getLogSumExp(),
                              getTransposeWeight(), getChunkRows(),
                              getLabelSmoothing().convertToDouble())))
    return failure();
  return verifyGradientTypes(*this);
}

LogicalResult LinearCrossEntropyWithGradOp::verify() {
  if (failed(verifyClassifier(*this, getHidden(), getWeight(), getBias(),
                              getTargets(), Value(), getTransposeWeight(),
                              getChunkRows(),
                              getLabelSmoothing().convertToDouble())))
    return failure();
  return verifyGradientTypes(*this);
}

losses::ClassifierGeometry LinearCrossEntropyOp::getGeometry() {
  return classifierGeometry(getHidden(), getWeight(), getBias(),
                            getTransposeWeight(), getChunkRows());
}
losses::ClassifierGeometry LinearCrossEntropyGradOp::getGeometry() {
  return classifierGeometry(getHidden(), getWeight(), getBias(),
                            getTransposeWeight(), getChunkRows());
}
losses::ClassifierGeometry LinearCrossEntropyWithGradOp::getGeometry() {
  return classifierGeometry(getHidden(), getWeight(), getBias(),
                            getTransposeWeight(), getChunkRows());
}

int64_t LinearCrossEntropyOp::getRecomputeFlops() {
  losses::ClassifierGeometry g = getGeometry();
  // The product, the bias, and an exponential and two sums per logit.
  return g.rows * g.classes * (2 * g.dim + 4 + g.bias);
}

int64_t LinearCrossEntropyGradOp::getRecomputeFlops() {
  losses::ClassifierGeometry g = getGeometry();
  // The bias added, and its gradient summed.
  return g.rows * g.classes * (6 * g.dim + 4 + 2 * g.bias);
}

int64_t LinearCrossEntropyWithGradOp::getRecomputeFlops() {
  losses::ClassifierGeometry g = getGeometry();
  // The loss's exponentials and sums, the gradient's, the bias's.
  return g.rows * g.classes * (6 * g.dim + 8 + 2 * g.bias);
}

int64_t LinearCrossEntropyOp::getCpuWorkspaceBytes() {
  return 4 * losses::classifierWorkspaceFloats(getGeometry(),
                                               /*backward=*/false);
}

int64_t LinearCrossEntropyGradOp::getCpuWorkspaceBytes() {
  return 4 * losses::classifierWorkspaceFloats(getGeometry(),
                                               /*backward=*/true);
}

int64_t LinearCrossEntropyWithGradOp::getCpuWorkspaceBytes() {
  return 4 * losses::classifierWithGradWorkspaceFloats(getGeometry());
}

losses::ClassifierPass LinearCrossEntropyOp::getCudaPass() {
  return getAccuracy() ? losses::ClassifierPass::ForwardWithAccuracy
                       : losses::ClassifierPass::Forward;
}

int64_t LinearCrossEntropyOp::getCudaScratchBytes() {
  return losses::classifierCudaScratch(getGeometry(), getCudaPass()).held +
         losses::kCudaGemmHeadroom;
}

int64_t LinearCrossEntropyGradOp::getCudaScratchBytes() {
  return losses::classifierCudaScratch(getGeometry(),
                                       losses::ClassifierPass::Backward)
             .held +
         losses::kCudaGemmHeadroom;
}

int64_t LinearCrossEntropyWithGradOp::getCudaScratchBytes() {
  return losses::classifierCudaScratch(
             getGeometry(), losses::ClassifierPass::ForwardAndBackward)
             .held +
         losses::kCudaGemmHeadroom;
}

SmallVector<Value> LinearCrossEntropyOp::buildGradient(OpBuilder &b,
                                                       ArrayRef<Value> grads) {
  // The log-sum-exp is read by the gradient alone; the targets get none.
  SmallVector<Value> operandGrads((*this)->getNumOperands());
  if (!grads[0])
    return operandGrads;
  SmallVector<Type> types{getHidden().getType(), getWeight().getType()};
  if (getBias())
    types.push_back(getBias().getType());
  auto grad = b.create<LinearCrossEntropyGradOp>(
      getLoc(), types, grads[0], getHidden(), getWeight(), getTargets(),
      getLogSumExp(), getBias(), getTransposeWeight(), getChunkRows(),
      getIgnoreIndex(), getLabelSmoothing());
  operandGrads[0] = grad.getHiddenGrad();
  operandGrads[1] = grad.getWeightGrad();
  if (getBias())
    operandGrads[3] = grad.getBiasGrad();
  return operandGrads;
}

/// On the GPU each row's value (its loss, its hit) and whether it counts
/// go to scratch, then one block averages them in a fixed order
/// (LossesEmission.cpp).
static int64_t rowValueBytes(Value logits) {
  RankedTensorType type = tensorType(logits);
  int64_t classes = type.getRank() == 0 ? 1 : type.getShape().back();
  return 2 * (type.getNumElements() / std::max<int64_t>(1, classes) * 4);
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
