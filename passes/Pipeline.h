//===- Pipeline.h - The mnemoc pass pipeline --------------------*- C++ -*-===//
//
// One place that says which passes run, in which order, between MLIRGen and
// the output. Later stages (autodiff, planning, codegen) append here.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_PIPELINE_H
#define MNEMO_PASSES_PIPELINE_H

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace mnemo {

/// Adds the default pipeline that `mnemoc --emit=mlir` runs on a module
/// straight out of MLIRGen.
void buildDefaultPipeline(mlir::OpPassManager &pm);

/// Registers the Mnemo passes and the `mnemo-default` pipeline with the
/// global registry, for --pass-pipeline and mnemo-opt.
void registerAllMnemoPasses();

} // namespace mnemo

#endif // MNEMO_PASSES_PIPELINE_H
