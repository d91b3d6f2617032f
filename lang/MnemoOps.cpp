//===- MnemoOps.cpp - The op classes and the verifiers' helpers -----------===//
//
// The ops' C++ classes (generated from every family's ODS) and the helpers
// of OpVerification.h that the families' verifiers share. Shape checks
// delegate to lang/ShapeRules.h so that the IR accepts exactly what the
// frontend produces.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/OpVerification.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;

LogicalResult verification::verifyResult(Operation *op,
                                         const shape::ShapeResult &rule,
                                         Type elementType) {
  if (!rule.ok())
    return op->emitOpError() << rule.error;
  Value result = op->getResult(0);
  if (shapeOf(result) != rule.shape)
    return op->emitOpError()
           << "result shape " << shape::format(shapeOf(result)) << " should be "
           << shape::format(rule.shape);
  if (elementType && tensorType(result).getElementType() != elementType)
    return op->emitOpError()
           << "result element type " << tensorType(result).getElementType()
           << " should be " << elementType;
  return success();
}

LogicalResult verification::verifySameElementType(Operation *op,
                                                  ValueRange values) {
  Type first = tensorType(values.front()).getElementType();
  for (Value v : values.drop_front())
    if (tensorType(v).getElementType() != first)
      return op->emitOpError()
             << "operands must share one element type, not " << first << " and "
             << tensorType(v).getElementType();
  return success();
}

std::pair<int64_t, int64_t> verification::rowsAndDepth(Value v) {
  auto type = tensorType(v);
  int64_t k = type.getRank() ? type.getDimSize(type.getRank() - 1) : 1;
  return {type.getNumElements() / std::max<int64_t>(k, 1), k};
}

LogicalResult verification::verifyRowProduct(Operation *op, Value lhs,
                                             Value result, int64_t n) {
  auto in = tensorType(lhs), out = tensorType(result);
  if (in.getRank() < 1 || out.getRank() != in.getRank() ||
      in.getShape().drop_back() != out.getShape().drop_back() ||
      out.getShape().back() != n)
    return op->emitOpError()
           << "the result must be " << in << " with its last dimension " << n
           << ", not " << out;
  return success();
}

#define GET_OP_CLASSES
#include "lang/MnemoOps.cpp.inc"
