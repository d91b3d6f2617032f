//===- Passes.h - Mnemo passes ----------------------------------*- C++ -*-===//

#ifndef MNEMO_PASSES_PASSES_H
#define MNEMO_PASSES_PASSES_H

#include "lang/MnemoDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mnemo {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mnemo

#endif // MNEMO_PASSES_PASSES_H
