//===- Executor.cpp - The plan's regions and the device -------------------===//

#include "runtime/Executor.h"

#include "runtime/Failure.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace mnemo::runtime;

PlanRegions mnemo::runtime::regionsOf(const ModelInfo &model) {
  PlanRegions r;
  for (const StepInfo *step : {&model.trainStep, &model.evalStep}) {
    if (!step->run)
      continue;
    for (int i = 0; i < step->numArguments; ++i) {
      const ArgumentInfo &a = step->arguments[i];
      int64_t end = a.offset + a.bytes;
      int64_t &size = a.region == MemoryRegion::Parameters ? r.parameters
                      : a.region == MemoryRegion::OptimizerState
                          ? r.optimizerState
                      : a.region == MemoryRegion::Buffers ? r.buffers
                                                          : r.inputs;
      size = std::max(size, end);
    }
    // ZeRO-1: the arguments' offsets are in the full layout; a rank keeps
    // its parts.
    if (step->shardBytes)
      r.optimizerState = step->stateTensors * step->shardBytes;
    r.arena = std::max(r.arena, step->arenaBytes);
    r.gradients = std::max(r.gradients, step->gradientBytes);
    r.workspace = std::max(r.workspace, step->workspaceBytes);
  }
  return r;
}

void mnemo::runtime::placeRegions(uint8_t *block, const PlanRegions &regions,
                                  StepMemory &memory) {
  uint8_t *at = block;
  for (auto [field, size] :
       {std::pair<uint8_t **, int64_t>{&memory.parameters, regions.parameters},
        {&memory.gradients, regions.gradients},
        {&memory.optimizerState, regions.optimizerState},
        {&memory.buffers, regions.buffers},
        {&memory.inputs, regions.inputs},
        {&memory.arena, regions.arena},
        {&memory.workspace, regions.workspace}}) {
    *field = at;
    at += size;
  }
}

std::string mnemo::runtime::mib(int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2f MiB", double(bytes) / (1 << 20));
  return buffer;
}

float mnemo::runtime::resultOf(const StepInfo &step, const StepMemory &memory,
                               const char *name) {
  for (int i = 0; i < step.numResults; ++i)
    if (std::strcmp(step.results[i].name, name) == 0) {
      float v;
      std::memcpy(&v, memory.arena + step.results[i].arenaOffset, 4);
      return v;
    }
  return NAN;
}

bool mnemo::runtime::startDevice(const ModelInfo &model,
                                 const DeviceOptions &options, Device &device,
                                 std::string &error) {
  std::string noGpu, noCpu;
  bool gpu = cudaDeviceAvailable(noGpu);
  if (options.device == "cuda" && !gpu)
    return failWith(error, "--device cuda: " + noGpu);
  bool cpu = options.device == "cpu" || !gpu;
  if (cpu && !cpu::backendAvailable(noCpu))
    return failWith(error,
                    options.device == "cpu"
                        ? "--device cpu: " + noCpu
                        : "no device to run on: " + noGpu + "; and " + noCpu);
  if (cpu) {
    device.executor.reset();
    device.description =
        "CPU, " + std::to_string(cpu::threads()) + " threads" +
        (options.device == "cpu" ? std::string() : " (" + noGpu + ")");
    return true;
  }
  device.executor = makeCudaExecutor(model, options.cuda, error);
  if (!device.executor)
    return failWith(error, "the CUDA backend: " + error);
  device.description = device.executor->describe();
  return true;
}

HostPlanMemory::HostPlanMemory(const ModelInfo &model)
    : sizes(regionsOf(model)) {}

HostPlanMemory::~HostPlanMemory() { std::free(block); }

bool HostPlanMemory::allocate(StepMemory &memory, std::string &error) {
  int64_t total = bytes();
  block = static_cast<uint8_t *>(std::aligned_alloc(
      4096, std::max<int64_t>(4096, (total + 4095) / 4096 * 4096)));
  if (!block)
    return failWith(error, "cannot allocate the plan's " + mib(total));
  std::memset(block, 0, total);
  placeRegions(block, sizes, memory);
  return true;
}
