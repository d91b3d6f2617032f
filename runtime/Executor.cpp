//===- Executor.cpp - The plan's regions ----------------------------------===//

#include "runtime/Executor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
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
