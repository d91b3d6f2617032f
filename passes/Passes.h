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

/// Where `func` computes a classifier's logits anyway (the evaluation step
/// reports accuracy from them), its fused linear_cross_entropy becomes
/// cross_entropy of those logits: no second product
/// (FuseLinearCrossEntropy.cpp).
void readLossFromLogits(mlir::func::FuncOp func);

} // namespace mnemo

#endif // MNEMO_PASSES_PASSES_H
