//===- Checkpoint.cpp - Training checkpoints ------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Safetensors.h"

#include <cstring>
#include <vector>

namespace mnemo {
namespace runtime {

namespace {

uint8_t *regionOf(const ArgumentInfo &a, const StepMemory &memory) {
  std::string region = a.region;
  if (region == "parameters")
    return memory.parameters + a.offset;
  if (region == "optimizer_state")
    return memory.optimizerState + a.offset;
  return nullptr;
}

bool isState(const ArgumentInfo &a) {
  std::string role = a.role;
  return role == "param" || role == "opt_state";
}

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

int64_t elementCount(const ArgumentInfo &a) {
  int64_t n = 1;
  for (int i = 0; i < a.rank; ++i)
    n *= a.shape[i];
  return n;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace

bool saveCheckpoint(const std::string &path, const ModelInfo &model,
                    const StepMemory &memory, const RunPosition &position,
                    std::string &error) {
  SafetensorsFile file;
  const StepInfo &step = model.trainStep;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    if (!isState(a))
      continue;
    StoredTensor t;
    t.name = a.name;
    t.dtype = safetensorsDtype(a.dtype);
    t.shape.assign(a.shape, a.shape + a.rank);
    int64_t bytes = elementCount(a) * dtypeSize(t.dtype);
    const uint8_t *src = regionOf(a, memory);
    t.bytes.assign(src, src + bytes);
    file.tensors.push_back(std::move(t));
  }
  file.metadata["format"] = "mnemo-checkpoint-1";
  file.metadata["model"] = model.name;
  file.metadata["step"] = std::to_string(position.step);
  file.metadata["total_steps"] = std::to_string(position.totalSteps);
  file.metadata["seed"] = std::to_string(position.seed);
  file.metadata["threads"] = std::to_string(position.threads);
  return writeSafetensors(path, file, error);
}

bool loadCheckpoint(const std::string &path, const ModelInfo &model,
                    const StepMemory &memory, bool withState,
                    RunPosition &position, std::string &error) {
  SafetensorsFile file;
  if (!readSafetensors(path, file, error))
    return false;
  const StepInfo &step = model.trainStep;
  // Check everything first: a bad file changes nothing.
  std::vector<std::pair<const ArgumentInfo *, const StoredTensor *>> loads;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    if (!isState(a) || (!withState && std::string(a.role) != "param"))
      continue;
    const StoredTensor *t = file.find(a.name);
    std::vector<int64_t> shape(a.shape, a.shape + a.rank);
    if (!t) {
      error = "'" + path + "' has no tensor '" + a.name + "'" +
              (std::string(a.role) == "opt_state"
                   ? " (optimizer state: was it saved by another optimizer?)"
                   : "");
      return false;
    }
    if (t->dtype != safetensorsDtype(a.dtype) || t->shape != shape) {
      error = "'" + path + "': '" + a.name + "' is " + t->dtype +
              shapeText(t->shape) + " but the model's is " +
              safetensorsDtype(a.dtype) + shapeText(shape);
      return false;
    }
    loads.push_back({&a, t});
  }
  auto number = [&](const char *key, int64_t fallback) -> int64_t {
    auto it = file.metadata.find(key);
    if (it == file.metadata.end())
      return fallback;
    try {
      return std::stoll(it->second);
    } catch (...) {
      return fallback;
    }
  };
  if (withState) {
    auto it = file.metadata.find("format");
    if (it == file.metadata.end() || it->second != "mnemo-checkpoint-1") {
      error = "'" + path +
              "' is not a Mnemo checkpoint (no run position in its metadata); "
              "use --init to start from its weights";
      return false;
    }
    position.step = number("step", 0);
    position.totalSteps = number("total_steps", 0);
    position.seed = uint64_t(number("seed", 0));
    position.threads = int(number("threads", 0));
    if (position.step < 0) {
      error = "'" + path + "' has a negative step";
      return false;
    }
  }
  for (auto [a, t] : loads)
    std::memcpy(regionOf(*a, memory), t->bytes.data(), t->bytes.size());
  return true;
}

} // namespace runtime
} // namespace mnemo
