//===- Pipeline.h - The mnemoc pass pipeline --------------------*- C++ -*-===//
//
// One place that says which passes run, in which order, between MLIRGen and
// the output, built from one options struct. mnemoc, mnemo-interp, the
// remat studies (tools/driver/ModelDriver.h), mnemo-opt and mnemo-difftest
// (the `mnemo-default` pipeline and its options) and remat's own check of
// its choices (the planning tail) all build it here, so what remat tunes is
// the plan that is emitted.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_PIPELINE_H
#define MNEMO_PASSES_PIPELINE_H

#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace mnemo {

struct PipelineOptions {
  /// Plan parameter gradients in the arena rather than in a persistent
  /// region of their own (less memory; nothing can read them after the step).
  bool transientGradients = false;
  /// Rewrite written-out attention to mnemo.attention (fuse-attention).
  bool fuseAttention = true;
  /// Fuse cross_entropy(h @ W^T) into mnemo.linear_cross_entropy
  /// (fuse-linear-cross-entropy).
  bool fuseLinearCrossEntropy = true;
  /// Compute the training step's linear_cross_entropy gradient with the
  /// loss, in one pass over each chunk's logits (fuse-classifier-gradient).
  bool fuseClassifierGradient = true;
  /// Recompute in the backward what an elementwise or normalization op
  /// computes from values the backward keeps anyway (remat's
  /// recompute-cheap).
  bool recomputeCheap = true;
  /// bf16, f16 or f32; empty: the train section's precision.
  std::string precision;
  /// A JSON file that overrides the mixed-precision policy.
  std::string ampPolicy;
  /// Bytes the planned peak may use; 0: the train section's memory_budget.
  int64_t memoryBudget = 0;
  /// The device whose memory the budget and the report's peak count: "cpu"
  /// or "cuda" (with the CUDA workspace and the executor's buffers).
  std::string budgetDevice = "cpu";
  /// Rematerialization strategy (none, all, sqrt, auto, optimal).
  std::string remat = "auto";
  /// Seconds --remat=optimal's MILP solver may search.
  double rematTimeLimit = 60;
  /// mnemoc --mode=inference: @eval_step alone, with compressed weights.
  bool inference = false;
  /// Data parallelism: the ranks the plan is for (mnemoc --world-size; 0: a
  /// plan for one process that sums nothing, 1: the data-parallel plan on
  /// one rank, which runs the collectives' path), and the gradient bytes
  /// each of their sums collects (plan-gradient-exchange).
  int64_t worldSize = 0;
  int64_t gradientBucketBytes = 4 << 20;
  /// ZeRO-1: each rank keeps 1/worldSize of the optimizer state
  /// (mnemoc --shard-optimizer).
  bool shardOptimizer = false;
};

/// Adds the default pipeline that `mnemoc --emit=mlir` runs on a module
/// straight out of MLIRGen.
void buildDefaultPipeline(mlir::OpPassManager &pm,
                          const PipelineOptions &options = {});

/// How hard plan-memory searches: as for the emitted plan, or quickly (the
/// greedy planners alone), for remat's many candidate checks.
enum class PlannerEffort { Full, Quick };

/// The pipeline's tail after rematerialization: schedule, fuse-elementwise,
/// plan-memory. The default pipeline ends with it (Full); remat plans its
/// candidates with it.
void buildPlanningPipeline(mlir::OpPassManager &pm,
                           const PipelineOptions &options,
                           PlannerEffort effort);

/// Registers the Mnemo passes and the `mnemo-default` pipeline with the
/// global registry, for --pass-pipeline and mnemo-opt.
void registerAllMnemoPasses();

} // namespace mnemo

#endif // MNEMO_PASSES_PIPELINE_H
