//===- RematStudies.h - mnemoc --remat-curve and --fit-batch ----*- C++ -*-===//
//
// Questions about a model under memory budgets that take many compilations
// to answer, each one the full pipeline and the real planner:
//
// - the curve: recomputed FLOPs against the planned peak, for each strategy
//   (auto at budgets from the plan without recomputation down to the
//   smallest it reaches; all, sqrt and none are single points), as an SVG;
// - the largest batch whose plan fits a budget, for each strategy, with
//   the extra FLOPs at that batch: exact, because the plan is static.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_TOOLS_MNEMOC_REMATSTUDIES_H
#define MNEMO_TOOLS_MNEMOC_REMATSTUDIES_H

#include "frontend/Program.h"
#include "frontend/Sema.h"
#include "passes/Pipeline.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mnemo {

/// Writes the curve to `path`; false (with `error`) on failure.
bool writeRematCurve(const Program &program, const ElaborateOptions &options,
                     const PipelineOptions &pipeline, const std::string &path,
                     std::string &error);

/// Prints the largest batch (the model's `batch` hyper-parameter) whose
/// plan fits `budget` for each strategy; false (with `error`) when the
/// model has no batch hyper-parameter.
bool fitBatch(const Program &program, const ElaborateOptions &options,
              const PipelineOptions &pipeline, int64_t budget,
              llvm::raw_ostream &os, std::string &error);

} // namespace mnemo

#endif // MNEMO_TOOLS_MNEMOC_REMATSTUDIES_H
