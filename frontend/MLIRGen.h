//===- MLIRGen.h - Graph to the mnemo dialect -------------------*- C++ -*-===//
//
// The one bridge from the frontend to MLIR: each graph op becomes the mnemo
// op of the same name, with a location that points at the source expression
// (and, through CallSiteLoc, at the layer calls that led to it).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_FRONTEND_MLIRGEN_H
#define MNEMO_FRONTEND_MLIRGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace mnemo {

struct Graph;

/// Builds `module { func.func @forward(...) }` with the model's settings as
/// module attributes. Returns null (after printing the verifier's complaint)
/// only on an internal error: Sema already checked everything a user can get
/// wrong.
mlir::OwningOpRef<mlir::ModuleOp> mlirGen(mlir::MLIRContext &context,
                                          const Graph &graph);

} // namespace mnemo

#endif // MNEMO_FRONTEND_MLIRGEN_H
