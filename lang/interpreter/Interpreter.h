//===- Interpreter.h - The reference interpreter of mnemo IR ----*- C++ -*-===//
//
// Executes any function of the mnemo dialect on the CPU, at any point of the
// pass pipeline. It is the oracle every pass is checked against: simple and
// obviously right, not fast. Values are computed in double and rounded to
// their declared element type after every op (round to nearest even), so
// f32, bf16 and f16 programs give what that precision gives; `exact` mode
// skips the rounding, for finite-difference gradient checks in f64.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_INTERPRETER_INTERPRETER_H
#define MNEMO_LANG_INTERPRETER_INTERPRETER_H

#include "lang/interpreter/Tensor.h"

#include "mlir/Support/LogicalResult.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>
#include <vector>

namespace mlir {
class Type;
namespace func {
class FuncOp;
} // namespace func
} // namespace mlir

namespace mnemo {

/// The element type of a tensor type's elements.
ElementType elementTypeOf(mlir::Type type);

struct InterpreterOptions {
  /// Compute in double without rounding to the declared element types.
  bool exact = false;
  /// Mixed into dropout masks (with each op's seed and the element index),
  /// so each training step drops different elements. The train step passes
  /// its step number here.
  int64_t dropoutStep = 0;
  /// Execute a planned function (one with a step plan) inside one
  /// byte array at the planned offsets, and its in-place updates inside the
  /// arguments' storage, so that any planning mistake corrupts the results.
  bool arena = false;
};

class Interpreter {
public:
  explicit Interpreter(InterpreterOptions options = {}) : options(options) {}

  /// Runs `func` on `args` (checked against its signature). On failure,
  /// `error` says which op failed and why (an index out of range, ...).
  mlir::FailureOr<std::vector<Tensor>>
  run(mlir::func::FuncOp func, llvm::ArrayRef<Tensor> args, std::string &error);

  InterpreterOptions options;
};

} // namespace mnemo

#endif // MNEMO_LANG_INTERPRETER_INTERPRETER_H
