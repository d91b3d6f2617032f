//===- Differential.h - Run IR before and after passes, compare -*- C++ -*-===//
//
// The check every pass is tested with: run each function of a module before
// and after a pass pipeline, on the same random inputs, in the reference
// interpreter, and compare every result. Inputs are drawn to be valid:
// floats from a normal distribution, integers within the range their uses
// accept (the rows of an embedding table, the classes of a loss), masks at
// random.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_INTERPRETER_DIFFERENTIAL_H
#define MNEMO_LANG_INTERPRETER_DIFFERENTIAL_H

#include "lang/interpreter/Tensor.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace mnemo {

/// Valid random arguments for `func` (see above), reproducible from `seed`.
std::vector<Tensor> randomArguments(mlir::func::FuncOp func, uint64_t seed);

struct DifferentialResult {
  std::string function;
  bool ok = true;
  unsigned results = 0;
  double worstRelativeDifference = 0;
  std::string message; // what differed, or why it could not run
};

/// Runs every function of `before` that `after` also defines, on the same
/// random arguments, and compares the results: equal types, and values
/// within `rtol` (relative) or `atol` (absolute).
///
/// With `arenaAfter`, functions of `after` that carry a memory plan run in
/// the interpreter's arena mode, which checks the plan by execution.
std::vector<DifferentialResult>
compareModules(mlir::ModuleOp before, mlir::ModuleOp after, uint64_t seed,
               double rtol, double atol, bool arenaAfter = false);

} // namespace mnemo

#endif // MNEMO_LANG_INTERPRETER_DIFFERENTIAL_H
