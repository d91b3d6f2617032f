//===- Backward.h - Reverse-mode differentiation of a straight-line region -*-
// C++ -*-===//
//
// The core of the autodiff pass, usable on its own (the gradient checks use
// it): walks ops backwards, asks each for its vector-Jacobian product through
// GradientOpInterface, and sums the gradients of values with several uses.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_BACKWARD_H
#define MNEMO_PASSES_BACKWARD_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/DenseMap.h"

namespace mnemo {

/// Emits, at `b`'s insertion point, the gradient of `output` (seeded with
/// `seed`, of `output`'s type) with respect to every value the `ops` (in
/// program order) use. Returns the map from value to gradient; values that
/// do not reach `output`, and integer values, have none. Fails (with an
/// error on the op) if an op that a gradient reaches has no rule.
mlir::FailureOr<llvm::DenseMap<mlir::Value, mlir::Value>>
buildBackward(mlir::OpBuilder &b, llvm::ArrayRef<mlir::Operation *> ops,
              mlir::Value output, mlir::Value seed);

} // namespace mnemo

#endif // MNEMO_PASSES_BACKWARD_H
