//===- MnemoGradients.cpp - The gradient rule of every op -----------------===//
//
// The vector-Jacobian products of the ops whose families have no folder of
// their own yet (lang/ops/*/ hold the others), as their
// GradientOpInterface::buildGradient. The autodiff pass calls these and knows
// nothing about individual ops. Rules are written in mnemo ops; where a
// composition would keep large temporaries alive or lose precision, they use
// a dedicated backward op (relu_grad, max_grad, ...).
//
// `grads` holds one gradient per result, null where a result does not reach
// the loss; the returned vector holds one gradient per operand, null where
// an operand gets none (integers, masks).
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/ShapeRules.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::gradient;

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

SmallVector<Value> MatmulOp::buildGradient(OpBuilder &b,
                                           ArrayRef<Value> grads) {
  Value g = grads[0];
  if (!g)
    return {Value(), Value()};
  Emitter e{b, getLoc()};
  Value a = getLhs(), w = getRhs();
  bool ta = getTransposeLhs(), tw = getTransposeRhs();
  auto aType = typeOf(a), wType = typeOf(w);

  // dA = g @ W^T per row; transposed back when A is read transposed.
  SmallVector<int64_t> rowsShape(typeOf(g).getShape());
  rowsShape.back() = tw ? wType.getDimSize(1) : wType.getDimSize(0);
  auto rowsGradType = RankedTensorType::get(rowsShape, aType.getElementType());
  Value daRows = b.create<MatmulOp>(getLoc(), rowsGradType, g, w, false, !tw);
  Value dA = ta ? e.transposeLast2(daRows) : daRows;

  // dW from the rows of A and g flattened to matrices: [R, K] and [R, N].
  Value rowsA = ta ? e.transposeLast2(a) : a;
  auto rowsType = typeOf(rowsA);
  int64_t k = rowsType.getShape().back();
  int64_t n = typeOf(g).getShape().back();
  int64_t r = rowsType.getNumElements() / k;
  Value a2 =
      e.reshape(rowsA, RankedTensorType::get({r, k}, aType.getElementType()));
  Value g2 =
      e.reshape(g, RankedTensorType::get({r, n}, aType.getElementType()));
  Value dW =
      tw ? b.create<MatmulOp>(getLoc(), wType, g2, a2, true, false).getResult()
         : b.create<MatmulOp>(getLoc(), wType, a2, g2, true, false).getResult();
  return {dA, dW};
}

SmallVector<Value> BatchMatmulOp::buildGradient(OpBuilder &b,
                                                ArrayRef<Value> grads) {
  Value g = grads[0];
  if (!g)
    return {Value(), Value()};
  Value a = getLhs(), w = getRhs();
  bool ta = getTransposeLhs(), tw = getTransposeRhs();
  Location loc = getLoc();
  // A [M,K] (or [K,M] read transposed), W [K,N] (or [N,K]), g [M,N].
  Value dA =
      ta ? b.create<BatchMatmulOp>(loc, a.getType(), w, g, tw, true).getResult()
         : b.create<BatchMatmulOp>(loc, a.getType(), g, w, false, !tw)
               .getResult();
  Value dW =
      tw ? b.create<BatchMatmulOp>(loc, w.getType(), g, a, true, ta).getResult()
         : b.create<BatchMatmulOp>(loc, w.getType(), a, g, !ta, false)
               .getResult();
  return {dA, dW};
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

SmallVector<Value> ReshapeOp::buildGradient(OpBuilder &b,
                                            ArrayRef<Value> grads) {
  if (!grads[0] || !isFloatTensor(getInput()))
    return {Value()};
  Emitter e{b, getLoc()};
  return {e.reshape(grads[0], typeOf(getInput()))};
}

SmallVector<Value> TransposeOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  if (!grads[0] || !isFloatTensor(getInput()))
    return {Value()};
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  return {
      b.create<TransposeOp>(getLoc(), getInput().getType(), grads[0], inverse)
          .getResult()};
}

SmallVector<Value> BroadcastOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  if (!grads[0] || !isFloatTensor(getInput()))
    return {Value()};
  Emitter e{b, getLoc()};
  // Sum over the dimensions the broadcast added or stretched.
  auto in = typeOf(getInput()), out = typeOf(getResult());
  int64_t lead = out.getRank() - in.getRank();
  SmallVector<int64_t> axes, kept;
  for (int64_t i = 0; i < out.getRank(); ++i) {
    bool added = i < lead;
    bool stretched =
        !added && in.getDimSize(i - lead) == 1 && out.getDimSize(i) != 1;
    if (added || stretched)
      axes.push_back(i);
    else
      kept.push_back(out.getDimSize(i));
  }
  if (axes.empty())
    return {e.reshape(grads[0], in)};
  auto sumType = RankedTensorType::get(kept, in.getElementType());
  Value summed = b.create<SumOp>(getLoc(), sumType, grads[0], axes, false);
  return {e.reshape(summed, in)};
}
