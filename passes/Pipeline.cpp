//===- Pipeline.cpp - The mnemoc pass pipeline ----------------------------===//

#include "passes/Pipeline.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void mnemo::buildDefaultPipeline(mlir::OpPassManager &pm,
                                 const PipelineOptions &options) {
  // MLIRGen emits one op per source operation; canonicalization removes the
  // no-ops that layer composition creates (x*1, reshape chains, transposes
  // that cancel) and CSE merges repeated constants and broadcasts.
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  // Mixed precision before autodiff, so that what the backward saves is
  // stored in low precision; CSE leaves one cast per parameter.
  AmpOptions ampOptions;
  ampOptions.precision = options.precision;
  ampOptions.policyFile = options.ampPolicy;
  pm.addPass(createAmp(ampOptions));
  pm.addPass(mlir::createCSEPass());
  // Quantization-aware training reads the quantized weights through
  // fake-quant ops, in the master weights' f32. Inference reads them
  // quantized (CompressWeights).
  if (!options.inference)
    pm.addPass(createQat());
  // The training step, from the cleaned-up forward, cleaned up in turn
  // (gradient rules emit generic code: a broadcast of a scalar 1, ...).
  pm.addPass(createAutodiff());
  if (options.inference)
    pm.addPass(createCompressWeights());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  // Under a memory budget, recompute in the backward what the plan cannot
  // keep (checked against the real planner).
  RematOptions rematOptions;
  rematOptions.budget = options.memoryBudget;
  rematOptions.strategy = options.remat;
  rematOptions.timeLimit = options.rematTimeLimit;
  rematOptions.budgetDevice = options.budgetDevice;
  pm.addPass(createRemat(rematOptions));
  // Last: a memory-aware order, elementwise chains fused into single loops
  // (their intermediates need no memory), then every buffer of the step
  // functions gets its arena offset.
  pm.addPass(createSchedule());
  pm.addPass(createFuseElementwise());
  PlanMemoryOptions planOptions;
  planOptions.transientGradients = options.transientGradients;
  planOptions.budgetDevice = options.budgetDevice;
  pm.addPass(createPlanMemory(planOptions));
}

void mnemo::registerAllMnemoPasses() {
  registerMnemoPasses();
  mlir::PassPipelineRegistration<>(
      "mnemo-default", "The pipeline mnemoc runs after MLIRGen",
      [](mlir::OpPassManager &pm) { buildDefaultPipeline(pm); });
}
