//===- Passes.h - Mnemo passes ----------------------------------*- C++ -*-===//

#ifndef MNEMO_PASSES_PASSES_H
#define MNEMO_PASSES_PASSES_H

#include "lang/MnemoDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mnemo {

class LinearCrossEntropyOp;

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Where the evaluation step `func` computes a classifier's logits only for
/// accuracy (the model's output), its fused linear_cross_entropy reports
/// the accuracy too, chunk by chunk, and the logits go. Where `keepLogits`
/// keeps them (inference compresses the weight: an int8 or sparse
/// product), or anything else reads them, the fused op becomes
/// cross_entropy of those logits: no second product
/// (FuseLinearCrossEntropy.cpp).
void fuseEvaluationMetrics(
    mlir::func::FuncOp func,
    llvm::function_ref<bool(LinearCrossEntropyOp)> keepLogits);

} // namespace mnemo

#endif // MNEMO_PASSES_PASSES_H
