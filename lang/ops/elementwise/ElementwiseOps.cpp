//===- ElementwiseOps.cpp - Folders and checks of elementwise ops ---------===//
//
// Adding zero, multiplying or dividing by one and casting to the same type
// fold away, as does a cast back after an exact widening; a cast keeps the
// shape, a selection's condition has the values' shape, and dropout's p is
// a probability below 1.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/OpVerification.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;

/// Whether `attr` is a splat constant equal to `value`.
static bool isSplatOf(Attribute attr, double value) {
  auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  Type element = dense.getElementType();
  if (llvm::isa<FloatType>(element))
    return dense.getSplatValue<APFloat>().convertToDouble() == value;
  if (element.isInteger(1))
    return false;
  if (llvm::isa<IntegerType>(element))
    return double(dense.getSplatValue<APInt>().getSExtValue()) == value;
  return false;
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 0.0))
    return getRhs();
  return {};
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return isSplatOf(adaptor.getRhs(), 0.0) ? getLhs() : OpFoldResult();
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 1.0))
    return getRhs();
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return isSplatOf(adaptor.getRhs(), 1.0) ? getLhs() : OpFoldResult();
}

/// Whether every value of `from` is exactly a value of `to` (so that a
/// cast from -> to -> from gives back the original).
static bool widensExactly(Type from, Type to) {
  if (from == to)
    return true;
  if (to.isF32())
    return from.isBF16() || from.isF16();
  return false;
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // cast(cast(x)) after an exact widening (bf16 -> f32 -> bf16, f16 -> f32
  // -> ...) is one cast of x, or x itself. A narrowing inner cast rounds,
  // and stays.
  if (auto inner = getInput().getDefiningOp<CastOp>()) {
    Type original = tensorType(inner.getInput()).getElementType();
    Type middle = tensorType(inner.getResult()).getElementType();
    if (widensExactly(original, middle)) {
      if (inner.getInput().getType() == getType())
        return inner.getInput();
      getInputMutable().assign(inner.getInput());
      return getResult();
    }
  }
  return {};
}

LogicalResult CastOp::verify() {
  if (shapeOf(getInput()) != shapeOf(getResult()))
    return emitOpError("a cast cannot change the shape");
  return success();
}

LogicalResult WhereOp::verify() {
  if (shapeOf(getCondition()) != shapeOf(getResult()))
    return emitOpError() << "condition shape "
                         << shape::format(shapeOf(getCondition()))
                         << " differs from the value shape "
                         << shape::format(shapeOf(getResult()));
  return success();
}

LogicalResult CompareOp::verify() {
  StringRef predicate = getPredicate();
  if (!llvm::is_contained({"eq", "ne", "lt", "le", "gt", "ge"}, predicate))
    return emitOpError() << "predicate must be one of eq ne lt le gt ge, not '"
                         << predicate << "'";
  Type lhs = getLhs().getType().getElementType(),
       rhs = getRhs().getType().getElementType();
  if (lhs != rhs && !(llvm::isa<FloatType>(lhs) && llvm::isa<FloatType>(rhs)))
    return emitOpError() << "cannot compare " << lhs << " with " << rhs;
  return success();
}

LogicalResult LogicalOp::verify() {
  StringRef kind = getKind();
  size_t arity = kind == "not" ? 1 : 2;
  if (!llvm::is_contained({"and", "or", "xor", "not"}, kind))
    return emitOpError() << "kind must be one of and or xor not, not '" << kind
                         << "'";
  if (getInputs().size() != arity)
    return emitOpError() << "'" << kind << "' takes " << arity
                         << (arity == 1 ? " mask" : " masks");
  return success(); // shapes: SameOperandsAndResultShape
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0))
    return emitOpError() << "p must be in [0, 1), not " << p;
  return success();
}
