//===- Pipeline.cpp - The mnemoc pass pipeline ----------------------------===//

#include "passes/Pipeline.h"
#include "lang/ops/losses/LossesKernels.h"
#include "passes/Passes.h"

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
  // Attention written out as softmax(q @ k^T ...) @ v becomes the fused op
  // before anything (amp, autodiff) sees its [Tq, Tk] intermediates.
  if (options.fuseAttention)
    pm.addPass(createFuseAttention());
  // The classifier's product and its cross-entropy become one op that
  // holds a chunk of the logits at a time, before amp and autodiff see them.
  if (options.fuseLinearCrossEntropy) {
    FuseLinearCrossEntropyOptions chunking;
    if (options.budgetDevice == "cuda")
      chunking.minChunkRows = losses::kMinGpuChunkRows;
    pm.addPass(createFuseLinearCrossEntropy(chunking));
  }
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
  // The fused classifier loss's gradient with the loss: one product fewer.
  if (options.fuseClassifierGradient)
    pm.addPass(createFuseClassifierGradient());
  // Under a memory budget, recompute in the backward what the plan cannot
  // keep (checked against the real planner).
  RematOptions rematOptions;
  rematOptions.budget = options.memoryBudget;
  rematOptions.strategy = options.remat;
  rematOptions.timeLimit = options.rematTimeLimit;
  rematOptions.budgetDevice = options.budgetDevice;
  rematOptions.transientGradients = options.transientGradients;
  rematOptions.worldSize = options.worldSize;
  rematOptions.shardOptimizer = options.shardOptimizer;
  rematOptions.recomputeCheap = options.recomputeCheap;
  pm.addPass(createRemat(rematOptions));
  buildPlanningPipeline(pm, options, PlannerEffort::Full);
}

void mnemo::buildPlanningPipeline(mlir::OpPassManager &pm,
                                  const PipelineOptions &options,
                                  PlannerEffort effort) {
  // A memory-aware order, elementwise chains fused into single loops (their
  // intermediates need no memory), then every buffer of the step functions
  // gets its arena offset.
  pm.addPass(createSchedule());
  pm.addPass(createFuseElementwise());
  PlanMemoryOptions planOptions;
  planOptions.transientGradients = options.transientGradients;
  planOptions.gradientsByReadiness = options.worldSize >= 1;
  planOptions.budgetDevice = options.budgetDevice;
  if (effort == PlannerEffort::Quick) {
    planOptions.localSearchWork = 0;
    planOptions.exactMaxBuffers = 0;
  }
  pm.addPass(createPlanMemory(planOptions));
  // Data parallelism: where the gradients' sums over the ranks start and
  // are awaited, and under ZeRO-1 each rank's part of the optimizer state
  // (which remat's candidates must count).
  if (options.worldSize >= 1)
    pm.addPass(createPlanGradientExchange({options.worldSize,
                                           options.gradientBucketBytes,
                                           options.shardOptimizer}));
}

namespace {
/// PipelineOptions as the textual pipeline's options, so mnemo-opt and
/// mnemo-difftest build the pipeline mnemoc builds:
/// `mnemo-default{transient-gradients=true memory-budget=1000000}`.
struct DefaultPipelineTextOptions
    : mlir::PassPipelineOptions<DefaultPipelineTextOptions> {
#define PIPELINE_OPTION(Type, field, name, initial, help)                      \
  Option<Type> field{*this, name, llvm::cl::desc(help),                        \
                     llvm::cl::init(Type(initial))};
#include "passes/PipelineOptions.def"

  mnemo::PipelineOptions options() const {
    mnemo::PipelineOptions o;
#define PIPELINE_OPTION(Type, field, name, initial, help) o.field = field;
#include "passes/PipelineOptions.def"
    return o;
  }
};
} // namespace

void mnemo::registerAllMnemoPasses() {
  registerMnemoPasses();
  mlir::PassPipelineRegistration<DefaultPipelineTextOptions>(
      "mnemo-default", "The pipeline mnemoc runs after MLIRGen",
      [](mlir::OpPassManager &pm, const DefaultPipelineTextOptions &text) {
        buildDefaultPipeline(pm, text.options());
      });
}
