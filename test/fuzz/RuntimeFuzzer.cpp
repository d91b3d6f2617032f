//===- RuntimeFuzzer.cpp - libFuzzer target for the trainer's readers -----===//
//
// Everything a trainer reads from disk that a user may hand it: safetensors
// checkpoints (checked against a model), IDX image and label files (raw or
// gzipped) and token files. The first byte of an input picks the reader;
// the rest is the file. A reader must return an error or data, never crash,
// hang or read out of bounds (AddressSanitizer watches).
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Data.h"
#include "runtime/Idx.h"
#include "runtime/Npy.h"
#include "runtime/Safetensors.h"

#include <cstdio>
#include <string>
#include <unistd.h>

using namespace mnemo;
using namespace mnemo::runtime;

namespace {

// A small model in the shape the compiler describes one: two parameters,
// one optimizer slot each, an image batch and a token batch.
const ArgumentInfo kTrainArgs[] = {
    {"fc.weight",
     ArgumentRole::Param,
     "f32",
     2,
     {4, 3},
     MemoryRegion::Parameters,
     0,
     256,
     "",
     0},
    {"fc.bias",
     ArgumentRole::Param,
     "f32",
     1,
     {4},
     MemoryRegion::Parameters,
     256,
     256,
     "",
     0},
    {"fc.weight.momentum_buffer",
     ArgumentRole::OptState,
     "f32",
     2,
     {4, 3},
     MemoryRegion::OptimizerState,
     0,
     256,
     "",
     0},
    {"fc.bias.momentum_buffer",
     ArgumentRole::OptState,
     "f32",
     1,
     {4},
     MemoryRegion::OptimizerState,
     256,
     256,
     "",
     0},
    {"image",
     ArgumentRole::Input,
     "f32",
     3,
     {2, 2, 2},
     MemoryRegion::Inputs,
     0,
     256,
     "",
     0},
    {"label",
     ArgumentRole::Target,
     "i32",
     1,
     {2},
     MemoryRegion::Inputs,
     256,
     256,
     "",
     4},
};
const ArgumentInfo kTokenArgs[] = {
    {"tokens",
     ArgumentRole::Input,
     "i32",
     2,
     {2, 4},
     MemoryRegion::Inputs,
     0,
     256,
     "",
     50},
    {"next",
     ArgumentRole::Target,
     "i32",
     2,
     {2, 4},
     MemoryRegion::Inputs,
     256,
     256,
     "",
     50},
};
const ModelInfo kModel = {
    "Fuzz",
    "fuzz.mn",
    "{}",
    "{}",
    {nullptr, 0, 0, 0, 6, kTrainArgs, 0, nullptr, 0, nullptr},
    {nullptr, 0, 0, 0, 6, kTrainArgs, 0, nullptr, 0, nullptr}};

std::string writeTemp(const uint8_t *data, size_t size, const char *suffix) {
  std::string path = "/tmp/mnemo-fuzz-" + std::to_string(::getpid()) + suffix;
  FILE *f = std::fopen(path.c_str(), "wb");
  if (f) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

/// Opens the bytes as the token model's data (a file with `suffix`), then
/// reads a training batch and, if there is one, an evaluation batch.
void readBatches(const uint8_t *data, size_t size, const char *suffix) {
  std::string path = writeTemp(data, size, suffix), error;
  BatchLayout layout;
  layout.tensors = {&kTokenArgs[0], &kTokenArgs[1]};
  layout.batchSize = 2;
  std::unique_ptr<BatchSource> source =
      openBatchSource(path, layout, layout, 1, error);
  if (source) {
    alignas(64) uint8_t inputs[512];
    source->trainBatch(1, inputs, error);
    if (source->evalBatches() > 0)
      source->evalBatch(0, inputs, error);
  }
  ::unlink(path.c_str());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  uint8_t which = data[0] % 6;
  std::string error;
  switch (which) {
  case 0: { // a checkpoint, with its optimizer state
    std::string path = writeTemp(data + 1, size - 1, ".safetensors");
    Checkpoint checkpoint;
    if (readCheckpoint(path, kModel, true, checkpoint, error)) {
      alignas(64) uint8_t params[512], state[512];
      StepMemory memory = {nullptr, params,  nullptr, state,
                           nullptr, nullptr, nullptr};
      applyCheckpoint(checkpoint, kModel, memory);
    }
    ::unlink(path.c_str());
    break;
  }
  case 1: { // weights only (--init)
    std::string path = writeTemp(data + 1, size - 1, ".safetensors");
    Checkpoint checkpoint;
    readCheckpoint(path, kModel, false, checkpoint, error);
    ::unlink(path.c_str());
    break;
  }
  case 2: { // an IDX file, raw or gzipped
    std::string path = writeTemp(data + 1, size - 1, ".idx");
    IdxArray array;
    readIdx(path, array, error, 1000);
    ::unlink(path.c_str());
    break;
  }
  case 3: // a token file, then one batch from it
    readBatches(data + 1, size - 1, ".bin");
    break;
  case 4: { // a .npy file
    std::string path = writeTemp(data + 1, size - 1, ".npy");
    StoredTensor tensor;
    readNpy(path, "x", tensor, error);
    ::unlink(path.c_str());
    break;
  }
  case 5: // named arrays (or recorded batches) in a .safetensors file
    readBatches(data + 1, size - 1, ".safetensors");
    break;
  }
  return 0;
}
