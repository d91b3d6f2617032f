//===- CppEmitter.h - C++ for the CPU backend -------------------*- C++ -*-===//
//
// Turns a planned module (after plan-memory) into one C++ file: a function
// per step (@train_step, @eval_step) whose every tensor lives at its planned
// offset, and the model's description (arguments, regions, results,
// initializers, train settings) that the runtime's trainer reads. GEMMs and
// other kernels call runtime/cpu/Kernels.h; elementwise ops, with the
// producers fuse-elementwise marked, become single loops.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_CODEGEN_CPPEMITTER_H
#define MNEMO_CODEGEN_CPPEMITTER_H

#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/raw_ostream.h"

namespace mnemo {

/// Emits the module's step functions and description as C++. Fails with
/// an error on the offending op when something is not supported by the CPU
/// backend (the message says what).
mlir::LogicalResult emitCpp(mlir::ModuleOp module, llvm::StringRef sourceFile,
                            llvm::raw_ostream &os);

} // namespace mnemo

#endif // MNEMO_CODEGEN_CPPEMITTER_H
