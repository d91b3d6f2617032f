//===- EmbeddingOps.cpp - Shape checks and the gradient rule --------------===//
//
// An embedding gathers rows of a [V, D] table; its gradient scatters the
// rows' gradients back into a zero table (embedding_grad). The indices get
// no gradient.
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;

LogicalResult EmbeddingOp::verify() {
  return verifyResult(
      *this, shape::embedding(shapeOf(getTable()), shapeOf(getIndices())),
      tensorType(getTable()).getElementType());
}

LogicalResult EmbeddingGradOp::verify() {
  shape::ShapeResult forward =
      shape::embedding(shapeOf(getResult()), shapeOf(getIndices()));
  if (!forward.ok() || forward.shape != shapeOf(getGrad()))
    return emitOpError("the gradient's shape does not match the indices and "
                       "the table");
  return success();
}

SmallVector<Value> EmbeddingOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  auto table = llvm::cast<RankedTensorType>(getTable().getType());
  if (table.getElementType().isF32())
    return {b.create<EmbeddingGradOp>(getLoc(), table, grads[0], getIndices())
                .getResult(),
            Value()};
  // A 16-bit table (a gather over bf16 activations: upsampling by a
  // fractional factor; or embedding in an amp policy's low list): the rows
  // are summed in f32 and the table's gradient rounded once, as PyTorch
  // accumulates a 16-bit index_add or upsampling backward in float.
  auto f32 = [&](Type type) {
    return llvm::cast<RankedTensorType>(type).clone(b.getF32Type());
  };
  Value rows =
      b.create<CastOp>(getLoc(), f32(grads[0].getType()), grads[0]).getResult();
  Value sums =
      b.create<EmbeddingGradOp>(getLoc(), f32(table), rows, getIndices());
  return {b.create<CastOp>(getLoc(), table, sums).getResult(), Value()};
}
