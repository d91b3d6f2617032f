//===- MnemoGradients.cpp - The gradient rule of every op -----------------===//
//
// Each differentiable op's vector-Jacobian product, as its
// GradientOpInterface::buildGradient. The autodiff pass calls these and knows
// nothing about individual ops. Rules are written in mnemo ops; where a
// composition would keep large temporaries alive or lose precision, they use
// a dedicated backward op (relu_grad, layernorm_grad, ...).
//
// `grads` holds one gradient per result, null where a result does not reach
// the loss; the returned vector holds one gradient per operand, null where
// an operand gets none (integers, masks).
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/ShapeRules.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mnemo;

namespace {

RankedTensorType typeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

bool isFloatTensor(Value v) {
  return llvm::isa<FloatType>(typeOf(v).getElementType());
}

/// Small builders that keep the rules below readable.
struct Emitter {
  OpBuilder &b;
  Location loc;

  Value splat(RankedTensorType type, double value) {
    Type element = type.getElementType();
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
  }
  Value splatLike(Value like, double value) {
    return splat(typeOf(like), value);
  }
  Value add(Value x, Value y) {
    return b.create<AddOp>(loc, x.getType(), x, y);
  }
  Value sub(Value x, Value y) {
    return b.create<SubOp>(loc, x.getType(), x, y);
  }
  Value mul(Value x, Value y) {
    return b.create<MulOp>(loc, x.getType(), x, y);
  }
  Value div(Value x, Value y) {
    return b.create<DivOp>(loc, x.getType(), x, y);
  }
  Value neg(Value x) { return b.create<NegOp>(loc, x.getType(), x); }
  Value scale(Value x, double factor) { return mul(x, splatLike(x, factor)); }
  Value reshape(Value x, RankedTensorType type) {
    return x.getType() == type ? x
                               : b.create<ReshapeOp>(loc, type, x).getResult();
  }
  Value broadcast(Value x, RankedTensorType type) {
    return x.getType() == type
               ? x
               : b.create<BroadcastOp>(loc, type, x).getResult();
  }
  /// Sums `x` over `axes`, keeping them as size 1.
  Value sumKeep(Value x, ArrayRef<int64_t> axes) {
    SmallVector<int64_t> shape(typeOf(x).getShape());
    for (int64_t a : axes)
      shape[a] = 1;
    auto type = RankedTensorType::get(shape, typeOf(x).getElementType());
    return b.create<SumOp>(loc, type, x, axes, /*keep_dims=*/true);
  }
  /// A reduction's output gradient, spread back over the reduced axes.
  Value unreduce(Value grad, RankedTensorType inputType,
                 ArrayRef<int64_t> axes) {
    SmallVector<int64_t> kept(inputType.getShape());
    for (int64_t a : axes)
      kept[a] = 1;
    auto keptType = RankedTensorType::get(kept, inputType.getElementType());
    return broadcast(reshape(grad, keptType), inputType);
  }
  /// Swaps the last two dimensions.
  Value transposeLast2(Value x) {
    auto type = typeOf(x);
    SmallVector<int64_t> perm, shape;
    for (int64_t i = 0; i < type.getRank(); ++i)
      perm.push_back(i);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    for (int64_t p : perm)
      shape.push_back(type.getDimSize(p));
    return b.create<TransposeOp>(
        loc, RankedTensorType::get(shape, type.getElementType()), x, perm);
  }
  /// A scalar gradient (of a loss) broadcast to `like`'s type.
  Value spread(Value scalarGrad, Value like) {
    return broadcast(scalarGrad, typeOf(like));
  }
};

/// Rules for ops whose operand and result types agree and whose gradient is
/// `grad * f(input, result)`.
template <typename Fn>
SmallVector<Value> elementwise(Operation *op, OpBuilder &b,
                               ArrayRef<Value> grads, Fn rule) {
  if (!grads[0])
    return {Value()};
  Emitter e{b, op->getLoc()};
  return {rule(e, grads[0], op->getOperand(0), op->getResult(0))};
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise arithmetic
//===----------------------------------------------------------------------===//

SmallVector<Value> AddOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0] || !isFloatTensor(getResult()))
    return {Value(), Value()};
  return {grads[0], grads[0]};
}

SmallVector<Value> SubOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0] || !isFloatTensor(getResult()))
    return {Value(), Value()};
  Emitter e{b, getLoc()};
  return {grads[0], e.neg(grads[0])};
}

SmallVector<Value> MulOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0] || !isFloatTensor(getResult()))
    return {Value(), Value()};
  Emitter e{b, getLoc()};
  return {e.mul(grads[0], getRhs()), e.mul(grads[0], getLhs())};
}

SmallVector<Value> DivOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0] || !isFloatTensor(getResult()))
    return {Value(), Value()};
  Emitter e{b, getLoc()};
  // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b, reusing the quotient.
  Value da = e.div(grads[0], getRhs());
  return {da, e.neg(e.mul(da, getResult()))};
}

SmallVector<Value> NegOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  return elementwise(*this, b, grads, [](Emitter &e, Value g, Value, Value) {
    return e.neg(g);
  });
}

SmallVector<Value> ExpOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  return elementwise(*this, b, grads, [](Emitter &e, Value g, Value, Value y) {
    return e.mul(g, y);
  });
}

SmallVector<Value> LogOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  return elementwise(*this, b, grads, [](Emitter &e, Value g, Value x, Value) {
    return e.div(g, x);
  });
}

SmallVector<Value> SqrtOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  return elementwise(*this, b, grads, [](Emitter &e, Value g, Value, Value y) {
    return e.div(e.scale(g, 0.5), y);
  });
}

SmallVector<Value> RsqrtOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  // d(x^-1/2)/dx = -1/2 x^-3/2 = -1/2 y^3.
  return elementwise(*this, b, grads, [](Emitter &e, Value g, Value, Value y) {
    return e.mul(e.scale(g, -0.5), e.mul(y, e.mul(y, y)));
  });
}

SmallVector<Value> TanhOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  return elementwise(*this, b, grads, [](Emitter &e, Value g, Value, Value y) {
    return e.mul(g, e.sub(e.splatLike(y, 1.0), e.mul(y, y)));
  });
}

SmallVector<Value> SigmoidOp::buildGradient(OpBuilder &b,
                                            ArrayRef<Value> grads) {
  return elementwise(*this, b, grads, [](Emitter &e, Value g, Value, Value y) {
    return e.mul(g, e.mul(y, e.sub(e.splatLike(y, 1.0), y)));
  });
}

SmallVector<Value> ReluOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  return elementwise(*this, b, grads, [](Emitter &e, Value g, Value x, Value) {
    return e.b.create<ReluGradOp>(e.loc, g.getType(), g, x).getResult();
  });
}

SmallVector<Value> SiluOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  return elementwise(*this, b, grads, [](Emitter &e, Value g, Value x, Value) {
    return e.b.create<SiluGradOp>(e.loc, g.getType(), g, x).getResult();
  });
}

SmallVector<Value> GeluOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  bool approximate = getApproximate();
  return elementwise(*this, b, grads, [&](Emitter &e, Value g, Value x, Value) {
    return e.b.create<GeluGradOp>(e.loc, g.getType(), g, x, approximate)
        .getResult();
  });
}

SmallVector<Value> PowOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  double c = getExponent().convertToDouble();
  return elementwise(*this, b, grads, [&](Emitter &e, Value g, Value x, Value) {
    if (c == 1.0)
      return g;
    if (c == 2.0)
      return e.mul(e.scale(g, 2.0), x);
    Value xPow =
        e.b.create<PowOp>(e.loc, x.getType(), x, e.b.getF64FloatAttr(c - 1));
    return e.mul(e.scale(g, c), xPow);
  });
}

SmallVector<Value> CastOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0] || !isFloatTensor(getInput()))
    return {Value()};
  return {
      b.create<CastOp>(getLoc(), getInput().getType(), grads[0]).getResult()};
}

SmallVector<Value> WhereOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0] || !isFloatTensor(getResult()))
    return {Value(), Value(), Value()};
  Emitter e{b, getLoc()};
  Value zero = e.splatLike(grads[0], 0.0);
  Type type = grads[0].getType();
  return {Value(),
          b.create<WhereOp>(getLoc(), type, getCondition(), grads[0], zero),
          b.create<WhereOp>(getLoc(), type, getCondition(), zero, grads[0])};
}

SmallVector<Value> DropoutOp::buildGradient(OpBuilder &b,
                                            ArrayRef<Value> grads) {
  // The mask is a function of the seed, the step and the position, so the
  // same op on the gradient drops (and scales) exactly the same elements.
  if (!grads[0])
    return {Value()};
  return {b.create<DropoutOp>(getLoc(), grads[0].getType(), grads[0],
                              getPAttr(), getSeedAttr())
              .getResult()};
}

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

SmallVector<Value> Conv2DOp::buildGradient(OpBuilder &b,
                                           ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value(), Value()};
  Value dx = b.create<Conv2DInputGradOp>(getLoc(), getInput().getType(),
                                         grads[0], getWeight(), getStrideAttr(),
                                         getPaddingAttr());
  Value dw = b.create<Conv2DWeightGradOp>(getLoc(), getWeight().getType(),
                                          grads[0], getInput(), getStrideAttr(),
                                          getPaddingAttr());
  return {dx, dw};
}

SmallVector<Value> MaxPool2DOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value()};
  return {b.create<MaxPool2DGradOp>(getLoc(), getInput().getType(), grads[0],
                                    getInput(), getKernelAttr(),
                                    getStrideAttr(), getPaddingAttr())
              .getResult()};
}

SmallVector<Value> AvgPool2DOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value()};
  return {b.create<AvgPool2DGradOp>(getLoc(), getInput().getType(), grads[0],
                                    getKernelAttr(), getStrideAttr(),
                                    getPaddingAttr())
              .getResult()};
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

SmallVector<Value> SumOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value()};
  Emitter e{b, getLoc()};
  return {e.unreduce(grads[0], typeOf(getInput()), getAxes())};
}

SmallVector<Value> MeanOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value()};
  Emitter e{b, getLoc()};
  int64_t count = typeOf(getInput()).getNumElements() /
                  typeOf(getResult()).getNumElements();
  return {e.scale(e.unreduce(grads[0], typeOf(getInput()), getAxes()),
                  1.0 / count)};
}

SmallVector<Value> MaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value()};
  return {b.create<MaxGradOp>(getLoc(), getInput().getType(), grads[0],
                              getInput(), getResult(), getAxesAttr(),
                              getKeepDimsAttr())
              .getResult()};
}

SmallVector<Value> FakeQuantOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  // The straight-through estimator, clipped to the range; the observed
  // range gets no gradient (PyTorch's FakeQuantize, without learned scale).
  if (!grads[0])
    return {Value(), Value(), Value()};
  return {b.create<FakeQuantGradOp>(getLoc(), getInput().getType(), grads[0],
                                    getInput(), getMin(), getMax(),
                                    getAxisAttr(), getQuantMinAttr(),
                                    getQuantMaxAttr(), getSymmetricAttr())
              .getResult(),
          Value(), Value()};
}

SmallVector<Value> SoftmaxOp::buildGradient(OpBuilder &b,
                                            ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value()};
  Emitter e{b, getLoc()};
  // dx = y * (g - sum(g * y)) along the axis.
  Value y = getResult(), g = grads[0];
  // The verifier has checked the axis, so it normalizes.
  int64_t axis = *shape::normalizeAxis(getAxis(), typeOf(y).getRank());
  Value dot = e.broadcast(e.sumKeep(e.mul(g, y), {axis}), typeOf(y));
  return {e.mul(y, e.sub(g, dot))};
}

SmallVector<Value> LogSoftmaxOp::buildGradient(OpBuilder &b,
                                               ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value()};
  Emitter e{b, getLoc()};
  // dx = g - softmax(x) * sum(g) along the axis; softmax(x) = exp(y).
  Value y = getResult(), g = grads[0];
  // The verifier has checked the axis, so it normalizes.
  int64_t axis = *shape::normalizeAxis(getAxis(), typeOf(y).getRank());
  Value total = e.broadcast(e.sumKeep(g, {axis}), typeOf(y));
  Value softmax = b.create<ExpOp>(getLoc(), y.getType(), y);
  return {e.sub(g, e.mul(softmax, total))};
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

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

SmallVector<Value> CrossEntropyOp::buildGradient(OpBuilder &b,
                                                 ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value(), Value()};
  return {b.create<CrossEntropyGradOp>(getLoc(), getLogits().getType(),
                                       grads[0], getLogits(), getTargets())
              .getResult(),
          Value()};
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

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

SmallVector<Value> EmbeddingOp::buildGradient(OpBuilder &b,
                                              ArrayRef<Value> grads) {
  if (!grads[0])
    return {Value(), Value()};
  return {b.create<EmbeddingGradOp>(getLoc(), getTable().getType(), grads[0],
                                    getIndices())
              .getResult(),
          Value()};
}

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

SmallVector<Value> SliceOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!grads[0] || !isFloatTensor(getInput()))
    return {Value()};
  return {b.create<SliceGradOp>(getLoc(), getInput().getType(), grads[0],
                                getAxisAttr(), getStartAttr(), getEndAttr(),
                                getStepAttr())
              .getResult()};
}

SmallVector<Value> ConcatOp::buildGradient(OpBuilder &b,
                                           ArrayRef<Value> grads) {
  SmallVector<Value> result(getInputs().size());
  if (!grads[0] || !isFloatTensor(getResult()))
    return result;
  int64_t axis = int64_t(getAxis());
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = typeOf(input).getDimSize(axis);
    result[i] = b.create<SliceOp>(getLoc(), input.getType(), grads[0], axis,
                                  offset, offset + size, 1);
    offset += size;
  }
  return result;
}
