//===- PlanExport.h - The memory plan as JSON -------------------*- C++ -*-===//
//
// `mnemoc --emit=plan`: every planned step function's arena, argument
// regions and buffers (offset, size, lifetime, kind, and the values stored
// in each), for code generators and tools. The schema is in docs/memory.md.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_PLANEXPORT_H
#define MNEMO_PASSES_PLANEXPORT_H

#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace mnemo {

/// A dictionary, array, number, bool or string attribute as JSON (null for
/// anything else): how the module's settings (`mnemo.train`,
/// `mnemo.hyperparams`) reach tools and generated trainers.
llvm::json::Value attributeToJson(mlir::Attribute attr);

/// Fails (with an error on the function) if a step function has no plan.
mlir::LogicalResult writePlanJson(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace mnemo

#endif // MNEMO_PASSES_PLANEXPORT_H
