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
  Option<bool> transientGradients{
      *this, "transient-gradients",
      llvm::cl::desc("Plan parameter gradients in the arena"),
      llvm::cl::init(false)};
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("bf16, f16 or f32 (default: the "
                                               "train section's)")};
  Option<std::string> ampPolicy{
      *this, "amp-policy",
      llvm::cl::desc("A JSON file that overrides the mixed-precision policy")};
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Bytes the planned peak may use (0: the train section's)"),
      llvm::cl::init(0)};
  Option<std::string> budgetDevice{
      *this, "device",
      llvm::cl::desc("cpu or cuda: whose memory the budget "
                     "counts"),
      llvm::cl::init("cpu")};
  Option<std::string> remat{*this, "remat",
                            llvm::cl::desc("none, all, sqrt, auto or optimal"),
                            llvm::cl::init("auto")};
  Option<double> rematTimeLimit{
      *this, "remat-time-limit",
      llvm::cl::desc("Seconds the MILP of --remat=optimal may search"),
      llvm::cl::init(60)};
  Option<bool> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("Rewrite written-out attention to the fused op"),
      llvm::cl::init(true)};
  Option<bool> fuseLinearCrossEntropy{
      *this, "fuse-linear-cross-entropy",
      llvm::cl::desc("Fuse cross_entropy of a classifier's product"),
      llvm::cl::init(true)};
  Option<bool> fuseClassifierGradient{
      *this, "fuse-classifier-gradient",
      llvm::cl::desc("Compute the fused classifier loss's gradient with "
                     "the loss"),
      llvm::cl::init(true)};
  Option<bool> recomputeCheap{
      *this, "recompute-cheap",
      llvm::cl::desc("Recompute cheap ops' results in the backward when "
                     "their operands are kept anyway"),
      llvm::cl::init(true)};
  Option<int64_t> worldSize{
      *this, "world-size",
      llvm::cl::desc("Ranks of a data-parallel run (gradients summed over "
                     "them; 0: not data-parallel)"),
      llvm::cl::init(0)};
  Option<int64_t> gradientBucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Gradient bytes per sum over the ranks"),
      llvm::cl::init(4 << 20)};
  Option<bool> shardOptimizer{
      *this, "shard-optimizer",
      llvm::cl::desc("ZeRO-1: each rank keeps 1/world-size of the optimizer "
                     "state"),
      llvm::cl::init(false)};
  Option<bool> inference{
      *this, "inference",
      llvm::cl::desc("The inference program: @eval_step alone, compressed"),
      llvm::cl::init(false)};

  mnemo::PipelineOptions options() const {
    mnemo::PipelineOptions o;
    o.transientGradients = transientGradients;
    o.precision = precision;
    o.ampPolicy = ampPolicy;
    o.memoryBudget = memoryBudget;
    o.budgetDevice = budgetDevice;
    o.remat = remat;
    o.rematTimeLimit = rematTimeLimit;
    o.inference = inference;
    o.fuseAttention = fuseAttention;
    o.fuseLinearCrossEntropy = fuseLinearCrossEntropy;
    o.fuseClassifierGradient = fuseClassifierGradient;
    o.recomputeCheap = recomputeCheap;
    o.worldSize = worldSize;
    o.gradientBucketBytes = gradientBucketBytes;
    o.shardOptimizer = shardOptimizer;
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
