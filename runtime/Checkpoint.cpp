//===- Checkpoint.cpp - Training checkpoints ------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Failure.h"
#include "runtime/Safetensors.h"
#include "runtime/cpu/Half.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace mnemo::runtime {

namespace {

uint8_t *regionOf(const ArgumentInfo &a, const StepMemory &memory) {
  if (a.region != MemoryRegion::Parameters &&
      a.region != MemoryRegion::OptimizerState &&
      a.region != MemoryRegion::Buffers)
    return nullptr;
  return memory.base(a.region) + a.offset;
}

bool isState(const ArgumentInfo &a) { return isPersistentRole(a.role); }

std::string safetensorsDtype(const std::string &dtype) {
  if (dtype == "f32")
    return "F32";
  if (dtype == "bf16")
    return "BF16";
  if (dtype == "f16")
    return "F16";
  if (dtype == "i32")
    return "I32";
  if (dtype == "i8")
    return "I8";
  return "U8";
}

} // namespace

bool checkValues(const StoredTensor &t, std::string &error) {
  // A second moment is a running mean of squares; adamw8bit's block
  // maxima and the loss scale are magnitudes.
  auto endsWith = [&](const char *suffix) {
    size_t n = std::strlen(suffix);
    return t.name.size() >= n &&
           t.name.compare(t.name.size() - n, n, suffix) == 0;
  };
  bool nonNegative = endsWith(".exp_avg_sq") || endsWith(".absmax") ||
                     endsWith(".scale") || t.name == "loss_scale";
  int64_t width = dtypeSize(t.dtype);
  if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
    return true;
  int64_t n = int64_t(t.bytes.size()) / width;
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (t.dtype == "F32") {
      std::memcpy(&v, t.bytes.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      cpu::bf16_t b;
      cpu::f16_t f;
      b.bits = f.bits = h;
      v = t.dtype == "BF16" ? float(b) : float(f);
    }
    if (!std::isfinite(v))
      return failWith(error, "'" + t.name + "' holds " +
                                 (std::isnan(v) ? "nan" : "inf") +
                                 " at element " + std::to_string(i) +
                                 "; training from it would only spread it");
    if (nonNegative && v < 0)
      return failWith(error, "'" + t.name + "' holds " + std::to_string(v) +
                                 " at element " + std::to_string(i) +
                                 ", and it cannot be negative");
  }
  return true;
}

StoredTensor storedArgument(const ArgumentInfo &a, const StepMemory &memory) {
  StoredTensor t;
  t.name = a.name;
  t.dtype = safetensorsDtype(a.dtype);
  t.shape.assign(a.shape, a.shape + a.rank);
  int64_t bytes = a.elements() * dtypeSize(t.dtype);
  const uint8_t *src = regionOf(a, memory);
  t.bytes.assign(src, src + bytes);
  return t;
}

bool saveCheckpoint(const std::string &path, const ModelInfo &model,
                    const StepMemory &memory, const RunPosition &position,
                    std::string &error) {
  SafetensorsFile file;
  const StepInfo &step = model.trainStep;
  for (int i = 0; i < step.numArguments; ++i)
    if (isState(step.arguments[i]))
      file.tensors.push_back(storedArgument(step.arguments[i], memory));
  file.metadata["format"] = "mnemo-checkpoint-1";
  file.metadata["model"] = model.name;
  file.metadata["step"] = std::to_string(position.step);
  file.metadata["total_steps"] = std::to_string(position.totalSteps);
  file.metadata["seed"] = std::to_string(position.seed);
  file.metadata["threads"] = std::to_string(position.threads);
  file.metadata["global_batch"] = std::to_string(position.globalBatch);
  file.metadata["ranks"] = std::to_string(position.ranks);
  return writeSafetensors(path, file, error);
}

bool readCheckpoint(const std::string &path, const ModelInfo &model,
                    bool withState, Checkpoint &checkpoint,
                    std::string &error) {
  SafetensorsFile &file = checkpoint.file;
  if (!readSafetensors(path, file, error))
    return false;
  checkpoint.withState = withState;
  // Resuming needs the run's position and optimizer state: a file of
  // weights alone (another program's, or --export's) is said to be one.
  auto format = file.metadata.find("format");
  if (withState &&
      (format == file.metadata.end() || format->second != "mnemo-checkpoint-1"))
    return failWith(
        error,
        "'" + path +
            "' is not a Mnemo checkpoint (no run position or optimizer state "
            "in it); use --init to start from its weights");
  const StepInfo &step = model.trainStep;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    if (!isState(a) || (!withState && a.role != ArgumentRole::Param))
      continue;
    const StoredTensor *t = file.find(a.name);
    std::vector<int64_t> shape(a.shape, a.shape + a.rank);
    if (!t)
      return failWith(
          error,
          "'" + path + "' has no tensor '" + a.name + "'" +
              (a.role == ArgumentRole::OptState
                   ? " (optimizer state: was it saved by another optimizer?)"
                   : ""));
    if (t->dtype != safetensorsDtype(a.dtype) || t->shape != shape)
      return failWith(error, "'" + path + "': '" + a.name + "' is " + t->dtype +
                                 shapeText(t->shape) + " but the model's is " +
                                 safetensorsDtype(a.dtype) + shapeText(shape));
    if (!checkValues(*t, error))
      return failWith(error, "'" + path + "': " + error);
  }
  if (!withState)
    return true;
  // At most `most`: the step after the checkpoint's must be countable,
  // and thread and rank counts are ints.
  auto number = [&](const char *key, int64_t &value,
                    int64_t most = INT64_MAX - 1) {
    auto entry = file.metadata.find(key);
    if (entry == file.metadata.end())
      return false;
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(entry->second.c_str(), &end, 10);
    if (errno || !end || *end || entry->second.empty() || v < 0 || v > most)
      return false;
    value = v;
    return true;
  };
  int64_t done = 0, total = 0, seed = 0, threads = 0;
  if (!number("step", done) || !number("total_steps", total) ||
      !number("seed", seed, INT64_MAX) ||
      !number("threads", threads, INT32_MAX))
    return failWith(error,
                    "'" + path +
                        "' has a damaged run position (step, total_steps, "
                        "seed, threads) in its metadata");
  checkpoint.position.step = done;
  checkpoint.position.totalSteps = total;
  checkpoint.position.seed = uint64_t(seed);
  checkpoint.position.threads = int(threads);
  // Optional: checkpoints written before data parallelism lack them.
  int64_t globalBatch = 0, ranks = 0;
  bool hasBatch = file.metadata.count("global_batch") != 0;
  bool hasRanks = file.metadata.count("ranks") != 0;
  if ((hasBatch && !number("global_batch", globalBatch)) ||
      (hasRanks && !number("ranks", ranks, INT32_MAX)))
    return failWith(
        error, "'" + path +
                   "' has a damaged run position (global_batch, ranks) in its "
                   "metadata");
  checkpoint.position.globalBatch = globalBatch;
  checkpoint.position.ranks = int(ranks);
  return true;
}

void applyCheckpoint(const Checkpoint &checkpoint, const ModelInfo &model,
                     const StepMemory &memory) {
  const StepInfo &step = model.trainStep;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    if (!isState(a) || (!checkpoint.withState && a.role != ArgumentRole::Param))
      continue;
    const StoredTensor *t = checkpoint.file.find(a.name);
    std::memcpy(regionOf(a, memory), t->bytes.data(), t->bytes.size());
  }
}

} // namespace mnemo::runtime
