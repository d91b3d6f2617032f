//===- RunDump.h - What train --dump writes ---------------------*- C++ -*-===//
//
// train --dump DIR records a run for test/reference/compare.py, which
// trains the same model in PyTorch from the same start on the same batches:
// the initial and final parameters and buffers, every step's batch
// (NAME.K for step K of the run), the losses, and config.json (the model,
// its hyperparameters and train section, which tensors are parameters and
// which are the batch).
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_RUNDUMP_H
#define MNEMO_RUNTIME_RUNDUMP_H

#include "runtime/Data.h"
#include "runtime/Model.h"
#include "runtime/Safetensors.h"

#include <string>
#include <vector>

namespace mnemo::runtime {

class RunDump {
public:
  /// The files written into DIR, for the check that no output overwrites
  /// another output or an input (runtime/OutputFiles.h).
  static std::vector<std::string> files();

  /// Records the parameters and buffers the run starts from.
  RunDump(const ModelInfo &model, const StepMemory &start);

  /// Records the batch in `memory.inputs` as the run's step `index`
  /// (counting from 1).
  void recordBatch(const BatchLayout &batch, const StepMemory &memory,
                   int64_t index);

  /// Writes DIR (created if needed) with the state in `end` and the
  /// losses; each failure is added to `errors`, and the other files are
  /// still written.
  void write(const std::string &dir, const StepMemory &end,
             const std::vector<double> &losses, int64_t totalSteps,
             std::vector<std::string> &errors) const;

private:
  const ModelInfo &model;
  SafetensorsFile initial, batches;
};

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_RUNDUMP_H
