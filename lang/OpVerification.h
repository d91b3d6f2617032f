//===- OpVerification.h - What op verifiers share ---------------*- C++ -*-===//
//
// The helpers every op's verifier uses, in the op families'
// FAMILYOps.cpp (defined in lang/MnemoOps.cpp): a value's shape for the shape
// rules (lang/ShapeRules.h), and the check of a result against what a rule
// computed, so that every op words the same mistake the same way.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPVERIFICATION_H
#define MNEMO_LANG_OPVERIFICATION_H

#include "lang/ShapeRules.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <utility>

namespace mnemo::verification {

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}

inline shape::Shape shapeOf(mlir::Value v) {
  llvm::ArrayRef<int64_t> dims = tensorType(v).getShape();
  return shape::Shape(dims.begin(), dims.end());
}

/// Checks that `op`'s first result has the shape the rule computed and,
/// when given, the element type.
mlir::LogicalResult verifyResult(mlir::Operation *op,
                                 const shape::ShapeResult &rule,
                                 mlir::Type elementType = nullptr);

/// Checks that `values` share one element type.
mlir::LogicalResult verifySameElementType(mlir::Operation *op,
                                          mlir::ValueRange values);

/// Rows of a `[..., K]` operand (its leading dimensions) and K: the
/// activations of the compressed-weight products.
std::pair<int64_t, int64_t> rowsAndDepth(mlir::Value v);

/// Checks that `result` is `lhs [..., K]` with its last dimension replaced
/// by `n`.
mlir::LogicalResult verifyRowProduct(mlir::Operation *op, mlir::Value lhs,
                                     mlir::Value result, int64_t n);

} // namespace mnemo::verification

#endif // MNEMO_LANG_OPVERIFICATION_H
