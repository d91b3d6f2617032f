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

#include <cstdint>
#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace mnemo {

/// Which passes run and how (PipelineOptions.def lists the fields).
struct PipelineOptions {
#define PIPELINE_OPTION(Type, field, name, initial, help) Type field = initial;
#include "passes/PipelineOptions.def"
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
