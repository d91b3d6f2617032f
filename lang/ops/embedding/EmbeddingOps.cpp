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
  if (!grads[0])
    return {Value(), Value()};
  return {b.create<EmbeddingGradOp>(getLoc(), getTable().getType(), grads[0],
                                    getIndices())
              .getResult(),
          Value()};
}
