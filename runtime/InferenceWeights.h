//===- InferenceWeights.h - Loading an inference plan's weights -*- C++ -*-===//
//
// An inference plan (mnemoc --mode=inference) reads its weights in the
// layouts `train --export` writes, under the same names: int8 or packed
// int4 codes with scales and zero points, 2:4-packed values with their
// positions, CSR. Loading is a checked byte copy into the parameters
// region: each tensor must have the plan's type and size (a CSR weight at
// most the plan's capacity, the rest left empty), so a wrong file is a
// message naming the tensor, not a wrong answer.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_INFERENCEWEIGHTS_H
#define MNEMO_RUNTIME_INFERENCEWEIGHTS_H

#include "runtime/Model.h"

#include <string>
#include <vector>

namespace mnemo::runtime {

struct LoadedWeights {
  /// One line per compressed weight, from the export's metadata:
  /// "fc1.weight  int8 per channel (dim 0), symmetric, trained, ...".
  std::vector<std::string> layouts;
  /// One line per weight the file held dense and loading compressed, as
  /// `train --export` would have: "fc1.weight  int8 ...: 1605632 -> 405504
  /// bytes".
  std::vector<std::string> compressedOnLoad;
};

/// Copies the parameters and buffers of `model`'s eval step from the
/// safetensors file at `path` into their regions of `memory`. A weight the file
/// holds dense (a checkpoint) where the plan reads it compressed is compressed
/// first, by `train --export`'s rules and the model's directives:
/// post-training quantization and pruning. False with `error` when a
/// tensor is missing or does not fit.
bool loadInferenceWeights(const std::string &path, const ModelInfo &model,
                          const StepMemory &memory, LoadedWeights &loaded,
                          std::string &error);

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_INFERENCEWEIGHTS_H
