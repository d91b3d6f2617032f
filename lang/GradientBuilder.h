//===- GradientBuilder.h - What gradient rules are written with -*- C++ -*-===//
//
// Small builders that keep the ops' gradient rules readable: each family's
// rules (lang/ops/*/...Ops.cpp, ...Gradients.cpp) are written with these,
// in mnemo ops.
//
// `grads` holds one gradient per result, null where a result does not reach
// the loss; a rule returns one gradient per operand, null where an operand
// gets none (integers, masks).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_GRADIENTBUILDER_H
#define MNEMO_LANG_GRADIENTBUILDER_H

#include "lang/MnemoOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mnemo::gradient {

using mlir::ArrayRef;
using mlir::DenseElementsAttr;
using mlir::FloatType;
using mlir::Location;
using mlir::OpBuilder;
using mlir::Operation;
using mlir::RankedTensorType;
using mlir::SmallVector;
using mlir::Type;
using mlir::Value;

inline mlir::RankedTensorType typeOf(mlir::Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

inline bool isFloatTensor(mlir::Value v) {
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
inline SmallVector<Value> elementwise(Operation *op, OpBuilder &b,
                                      ArrayRef<Value> grads, Fn rule) {
  if (!grads[0])
    return {Value()};
  Emitter e{b, op->getLoc()};
  return {rule(e, grads[0], op->getOperand(0), op->getResult(0))};
}

} // namespace mnemo::gradient

#endif // MNEMO_LANG_GRADIENTBUILDER_H
