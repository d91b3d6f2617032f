//===- AttentionOps.cpp - Shape checks, gradient rule and workspaces -----===//
//
// Fused attention's operands are checked by the shape rule the frontend
// uses too (shape::attention); its geometry is what every implementation
// reads. The gradient is one attention_grad op that recomputes the
// probabilities from the saved log-sum-exp, so the forward's [Tq, Tk]
// probabilities are never kept. The CPU kernels work in per-slot tiles of
// the plan's workspace (AttentionKernels.h's cpuWorkspaceFloats), the
// CUDA backward in a scratch of one f32 per query row.
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"
#include "lang/ops/attention/AttentionKernels.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;
using attention::AttentionGeometry;

namespace {

LogicalResult verifyAttention(Operation *op, Value q, Value k, Value v,
                              Value mask, double scale, double dropoutP,
                              Value logSumExp, Value output) {
  shape::Shape maskShape = mask ? shapeOf(mask) : shape::Shape();
  shape::ShapeResult rule = shape::attention(shapeOf(q), shapeOf(k), shapeOf(v),
                                             mask ? &maskShape : nullptr);
  if (!rule.ok())
    return op->emitOpError() << rule.error;
  if (failed(verifySameElementType(op, {q, k, v, output})))
    return failure();
  if (shapeOf(output) != rule.shape)
    return op->emitOpError()
           << "output shape " << shape::format(shapeOf(output)) << " should be "
           << shape::format(rule.shape);
  shape::Shape rows = shapeOf(q);
  rows.pop_back();
  if (shapeOf(logSumExp) != rows)
    return op->emitOpError()
           << "log-sum-exp shape " << shape::format(shapeOf(logSumExp))
           << " should be " << shape::format(rows);
  if (!(std::isfinite(scale) && scale != 0))
    return op->emitOpError() << "scale must be finite and nonzero";
  if (!(dropoutP >= 0 && dropoutP < 1))
    return op->emitOpError() << "dropout_p must be in [0, 1)";
  return success();
}

AttentionGeometry geometryOf(Value q, Value k, Value v, Value mask, bool causal,
                             double scale, double dropoutP, int64_t seed) {
  ArrayRef<int64_t> qs = tensorType(q).getShape(),
                    ks = tensorType(k).getShape();
  size_t rank = qs.size();
  AttentionGeometry g{};
  g.batch = 1;
  for (size_t d = 0; d + 3 < rank; ++d)
    g.batch *= qs[d];
  g.heads = qs[rank - 3];
  g.kvHeads = ks[rank - 3];
  g.queries = qs[rank - 2];
  g.keys = ks[rank - 2];
  g.headDim = qs[rank - 1];
  g.valueDim = tensorType(v).getShape()[rank - 1];
  g.causal = causal;
  g.scale = scale;
  g.dropoutP = dropoutP;
  g.seed = seed;
  g.maskKind = attention::kNoMask;
  if (!mask)
    return g;
  RankedTensorType maskType = tensorType(mask);
  g.maskKind = maskType.getElementType().isInteger(1)
                   ? attention::kBooleanMask
                   : attention::kAdditiveMask;
  // The mask right-aligned under [lead..., H, Tq, Tk]: contiguous strides,
  // 0 where it broadcasts; its leading dimensions are all broadcast or all
  // present (the shape rule), so one stride walks the flattened batch.
  ArrayRef<int64_t> ms = maskType.getShape();
  size_t offset = rank - ms.size();
  SmallVector<int64_t> dims(rank, 1), strides(rank, 0);
  for (size_t d = 0; d < ms.size(); ++d)
    dims[offset + d] = ms[d];
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    strides[d] = dims[d] == 1 ? 0 : stride;
    stride *= dims[d];
  }
  g.maskKeyStride = strides[rank - 1];
  g.maskQueryStride = strides[rank - 2];
  g.maskHeadStride = strides[rank - 3];
  g.maskBatchStride = 0;
  for (size_t d = 0; d + 3 < rank; ++d)
    if (dims[d] != 1)
      g.maskBatchStride = dims[rank - 3] * dims[rank - 2] * dims[rank - 1];
  return g;
}

/// Pairs of (query, key) a causal mask leaves visible, or all of them.
int64_t visiblePairs(const AttentionGeometry &g) {
  if (!g.causal)
    return g.queries * g.keys;
  int64_t pairs = 0;
  for (int64_t i = 0; i < g.queries; ++i)
    pairs += std::min<int64_t>(i + 1, g.keys);
  return pairs;
}

} // namespace

LogicalResult AttentionOp::verify() {
  return verifyAttention(*this, getQuery(), getKey(), getValue(), getMask(),
                         getScale().convertToDouble(),
                         getDropoutP().convertToDouble(), getLogSumExp(),
                         getResult());
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue(), getMask(),
                             getScale().convertToDouble(),
                             getDropoutP().convertToDouble(), getLogSumExp(),
                             getOutput())))
    return failure();
  if (getGradOutput().getType() != getOutput().getType())
    return emitOpError() << "the output's gradient must have the output's type";
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getValueGrad().getType() != getValue().getType())
    return emitOpError()
           << "the gradients must have the queries', keys' and values' types";
  return success();
}

AttentionGeometry AttentionOp::getGeometry() {
  return geometryOf(getQuery(), getKey(), getValue(), getMask(), getCausal(),
                    getScale().convertToDouble(),
                    getDropoutP().convertToDouble(), getSeed());
}

AttentionGeometry AttentionGradOp::getGeometry() {
  return geometryOf(getQuery(), getKey(), getValue(), getMask(), getCausal(),
                    getScale().convertToDouble(),
                    getDropoutP().convertToDouble(), getSeed());
}

int64_t AttentionOp::getRecomputeFlops() {
  AttentionGeometry g = getGeometry();
  // Scores and output: 2 (D + Dv) per visible pair, and the exponential.
  return g.batch * g.heads * visiblePairs(g) *
         (2 * (g.headDim + g.valueDim) + 5);
}

int64_t AttentionGradOp::getRecomputeFlops() {
  AttentionGeometry g = getGeometry();
  // Scores, dP, dV, dQ and dK: 2 (3 D + 2 Dv) per visible pair.
  return g.batch * g.heads * visiblePairs(g) *
         (2 * (3 * g.headDim + 2 * g.valueDim) + 10);
}

int64_t AttentionOp::getCpuWorkspaceBytes() {
  return 4 * attention::cpuWorkspaceFloats(getGeometry(), /*backward=*/false);
}
int64_t AttentionGradOp::getCpuWorkspaceBytes() {
  return 4 * attention::cpuWorkspaceFloats(getGeometry(), /*backward=*/true);
}

namespace {
unsigned elementBits(Value v) {
  return llvm::cast<ShapedType>(v.getType()).getElementTypeBitWidth();
}
} // namespace

int64_t AttentionOp::getCudaScratchBytes() {
  return attention::cudaScratchBytes(getGeometry(), elementBits(getQuery()),
                                     /*backward=*/false);
}
int64_t AttentionGradOp::getCudaScratchBytes() {
  return attention::cudaScratchBytes(getGeometry(), elementBits(getQuery()),
                                     /*backward=*/true);
}

SmallVector<Value> AttentionOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  // The log-sum-exp is never a model's value (only attention_grad reads
  // it), so only the output's gradient flows; the mask gets none.
  SmallVector<Value> none(getNumOperands(), Value());
  if (!grads[0])
    return none;
  auto grad = b.create<AttentionGradOp>(
      getLoc(),
      TypeRange{getQuery().getType(), getKey().getType(), getValue().getType()},
      getQuery(), getKey(), getValue(), getResult(), getLogSumExp(), grads[0],
      getMask(), getCausal(), getScale(), getDropoutP(), getSeed());
  SmallVector<Value> result{grad.getQueryGrad(), grad.getKeyGrad(),
                            grad.getValueGrad()};
  if (getMask())
    result.push_back(Value());
  return result;
}
