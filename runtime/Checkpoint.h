//===- Checkpoint.h - Training checkpoints ----------------------*- C++ -*-===//
//
// A checkpoint is a safetensors file: every parameter and buffer under its
// Mnemo path ("blocks.3.attn.wq.weight", "bn1.running_mean", loadable by
// PyTorch's load_state_dict after the usual renaming), the optimizer state
// under "<param>.<slot>", and the run's position in the metadata (step, total
// steps, seed, threads). It is written atomically; reading validates names,
// dtypes and shapes against the model and names the first tensor that does not
// fit.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_CHECKPOINT_H
#define MNEMO_RUNTIME_CHECKPOINT_H

#include "runtime/Model.h"
#include "runtime/Safetensors.h"

#include <cstdint>
#include <string>

namespace mnemo::runtime {

struct RunPosition {
  int64_t step = 0;       // steps completed
  int64_t totalSteps = 0; // the run's length (the schedule depends on it)
  uint64_t seed = 0;
  int threads = 0;
  /// The writing run's global batch (every rank's rows) and ranks, which
  /// decide the batches each step reads; 0 in checkpoints older than them.
  int64_t globalBatch = 0;
  int ranks = 0;
};

/// Writes the parameters and optimizer state of `step`'s arguments from
/// the regions in `memory`.
bool saveCheckpoint(const std::string &path, const ModelInfo &model,
                    const StepMemory &memory, const RunPosition &position,
                    std::string &error);

/// A persistent argument's current value (a parameter, a buffer, optimizer
/// state), from its region in `memory`, under its name and dtype.
StoredTensor storedArgument(const ArgumentInfo &argument,
                            const StepMemory &memory);

/// A checkpoint read and checked against the model, not yet copied in.
struct Checkpoint {
  SafetensorsFile file;
  RunPosition position;
  bool withState = false;
};

/// Reads `path` and checks every tensor against the model's arguments.
/// `withState` false takes only the parameters (fine-tuning from weights,
/// or a reference run's initial weights) and needs no run position.
bool readCheckpoint(const std::string &path, const ModelInfo &model,
                    bool withState, Checkpoint &checkpoint, std::string &error);

/// Refuses a float tensor holding NaN or infinity, or a negative value
/// where none can be (a second moment, a block maximum, the loss scale):
/// `error` names the tensor and the element.
bool checkValues(const StoredTensor &tensor, std::string &error);

/// Copies a checked checkpoint into the regions.
void applyCheckpoint(const Checkpoint &checkpoint, const ModelInfo &model,
                     const StepMemory &memory);

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_CHECKPOINT_H
