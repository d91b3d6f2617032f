//===- ElementwiseGradients.cpp - The elementwise ops' gradient rules ----===//
//
// The vector-Jacobian products of the elementwise family, as their
// GradientOpInterface::buildGradient. Every activation (relu, silu, gelu,
// softplus, ...) shares one rule, its backward op: the Mnemo_Activation
// entry in ElementwiseOps.td defines both ops and calls
// buildActivationGradient below.
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::gradient;

SmallVector<Value> mnemo::buildActivationGradient(Operation *op,
                                                  OpBuilder &builder,
                                                  ArrayRef<Value> grads,
                                                  bool fromOutput) {
  // `foo_grad(grad, input or output)` with foo's attributes: the multiclass
  // gives the two ops the same ones.
  OperationState state(op->getLoc(),
                       op->getName().getStringRef().str() + "_grad");
  state.addOperands(
      {grads[0], fromOutput ? op->getResult(0) : op->getOperand(0)});
  state.addTypes(grads[0].getType());
  for (StringAttr name : op->getName().getAttributeNames())
    if (Attribute value =
            op->getInherentAttr(name.getValue()).value_or(nullptr))
      state.addAttribute(name, value);
  return {builder.create(state)->getResult(0)};
}

SmallVector<Value> AddOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!isFloatTensor(getResult()))
    return {Value(), Value()};
  return {grads[0], grads[0]};
}

SmallVector<Value> SubOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!isFloatTensor(getResult()))
    return {Value(), Value()};
  Emitter e{b, getLoc()};
  return {grads[0], e.neg(grads[0])};
}

SmallVector<Value> MulOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!isFloatTensor(getResult()))
    return {Value(), Value()};
  Emitter e{b, getLoc()};
  return {e.mul(grads[0], getRhs()), e.mul(grads[0], getLhs())};
}

SmallVector<Value> DivOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!isFloatTensor(getResult()))
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

SmallVector<Value> SinOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  return elementwise(*this, b, grads, [&](Emitter &e, Value g, Value x, Value) {
    return e.mul(g, b.create<CosOp>(getLoc(), x.getType(), x));
  });
}

SmallVector<Value> CosOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  return elementwise(*this, b, grads, [&](Emitter &e, Value g, Value x, Value) {
    return e.neg(e.mul(g, b.create<SinOp>(getLoc(), x.getType(), x)));
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
  if (!isFloatTensor(getInput()))
    return {Value()};
  return {
      b.create<CastOp>(getLoc(), getInput().getType(), grads[0]).getResult()};
}

SmallVector<Value> WhereOp::buildGradient(OpBuilder &b, ArrayRef<Value> grads) {
  if (!isFloatTensor(getResult()))
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
  return {b.create<DropoutOp>(getLoc(), grads[0].getType(), grads[0],
                              getPAttr(), getSeedAttr())
              .getResult()};
}
