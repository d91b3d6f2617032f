//===- PlannedModule.h - What the emitters require of their input -*- C++
//-*-===//
//
// The emitters read the memory plan that plan-memory wrote; a module from
// anywhere else (mnemo-translate reads any .mlir) is checked first, so an
// unplanned or hand-edited module is an error naming what is missing, not a
// crash in an emitter.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_CODEGEN_PLANNEDMODULE_H
#define MNEMO_CODEGEN_PLANNEDMODULE_H

#include "mlir/IR/BuiltinOps.h"

namespace mnemo {

/// Succeeds when the module has a step function and every step function
/// carries a whole plan: its region sizes, each argument's region and
/// offset, and each op's offsets and sizes (one per result, inside the
/// arena).
mlir::LogicalResult checkPlannedModule(mlir::ModuleOp module);

} // namespace mnemo

#endif // MNEMO_CODEGEN_PLANNEDMODULE_H
