//===- RunDump.cpp - What train --dump writes -----------------------------===//

#include "runtime/RunDump.h"

#include "runtime/Checkpoint.h"
#include "runtime/OutputFiles.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <utility>

using namespace mnemo;
using namespace mnemo::runtime;

namespace {

/// The parameters and buffers of the train step as safetensors tensors.
SafetensorsFile parameterFile(const ModelInfo &model,
                              const StepMemory &memory) {
  SafetensorsFile file;
  const StepInfo &step = model.trainStep;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    if (a.role == ArgumentRole::Param || a.role == ArgumentRole::Buffer)
      file.tensors.push_back(storedArgument(a, memory));
  }
  return file;
}

/// What compare.py needs to build and train the same model.
nlohmann::json configOf(const ModelInfo &model, int64_t steps,
                        int64_t totalSteps) {
  nlohmann::json config;
  config["model"] = model.name;
  config["steps"] = steps;
  config["total_steps"] = totalSteps;
  config["precision"] = model.precision;
  config["hyperparams"] =
      nlohmann::json::parse(model.hyperparams, nullptr, false);
  config["train"] = nlohmann::json::parse(model.train, nullptr, false);
  config["params"] = nlohmann::json::array();
  config["batch"] = nlohmann::json::array();
  const StepInfo &train = model.trainStep;
  for (int i = 0; i < train.numArguments; ++i) {
    ArgumentRole role = train.arguments[i].role;
    if (role == ArgumentRole::Param)
      config["params"].push_back(train.arguments[i].name);
    if (role == ArgumentRole::Input || role == ArgumentRole::Target)
      config["batch"].push_back(train.arguments[i].name);
  }
  return config;
}

} // namespace

std::vector<std::string> RunDump::files() {
  return {"init.safetensors", "batches.safetensors", "final.safetensors",
          "losses.safetensors", "config.json"};
}

RunDump::RunDump(const ModelInfo &model, const StepMemory &start)
    : model(model), initial(parameterFile(model, start)) {}

void RunDump::recordBatch(const BatchLayout &batch, const StepMemory &memory,
                          int64_t index) {
  for (const ArgumentInfo *a : batch.tensors) {
    StoredTensor t;
    t.name = std::string(a->name) + "." + std::to_string(index);
    t.dtype = std::string(a->dtype) == "f32" ? "F32" : "I32";
    t.shape.assign(a->shape, a->shape + a->rank);
    // The batch's elements, 4 bytes each, without the alignment padding
    // the plan may give a batch tensor.
    int64_t n = 4 * a->elements();
    const uint8_t *bytes = memory.inputs + a->offset;
    t.bytes.assign(bytes, bytes + std::min(n, a->bytes));
    t.bytes.resize(n);
    batches.tensors.push_back(std::move(t));
  }
}

void RunDump::write(const std::string &dir, const StepMemory &end,
                    const std::vector<double> &losses, int64_t totalSteps,
                    std::vector<std::string> &errors) const {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    errors.push_back("cannot create '" + dir + "': " + std::strerror(errno));
  SafetensorsFile final = parameterFile(model, end), lossFile;
  lossFile.tensors.push_back(
      StoredTensor::f32("loss", {int64_t(losses.size())},
                        std::vector<float>(losses.begin(), losses.end())));
  std::string error;
  for (auto [name, file] :
       {std::pair<const char *, const SafetensorsFile *>{"init", &initial},
        {"batches", &batches},
        {"final", &final},
        {"losses", &lossFile}})
    if (!writeSafetensors(dir + "/" + name + ".safetensors", *file, error))
      errors.push_back(error);
  std::string text =
      configOf(model, int64_t(losses.size()), totalSteps).dump(2) + "\n";
  if (!writeAtomically(dir + "/config.json", {{text.data(), text.size()}},
                       error))
    errors.push_back(error);
}
