//===- MemoryRegion.h - The regions of a memory plan ----------------------===//
//
// The one enumeration of the plan's memory regions. The planner assigns
// them (passes/PlanMemory.cpp, through the plan attributes of
// lang/PlanAttributes.h), the memory report counts them, both emitters
// address them, and the trainer allocates and addresses them
// (runtime/Model.h's StepMemory; the CUDA kernels' Regions, whose
// regionBase() takes the same numbers). Plain C++, so the runtime, which
// never depends on LLVM, and the compiler share it.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_MEMORYREGION_H
#define MNEMO_RUNTIME_MEMORYREGION_H

#include <cstring>

namespace mnemo {

enum class MemoryRegion : int {
  Arena = 0,          ///< the step's transient tensors, planned offsets
  Parameters = 1,     ///< trained parameters (persistent)
  Gradients = 2,      ///< parameter gradients, when persistent
  OptimizerState = 3, ///< moments, momentum buffers (persistent)
  Inputs = 4,         ///< one batch, the step counters
  Workspace = 5,      ///< kernels' scratch (im2col, GEMM workspaces)
  Buffers = 6,        ///< state that is not trained: running statistics,
                      ///< quantization observers (persistent)
};

constexpr int kMemoryRegionCount = int(MemoryRegion::Buffers) + 1;

/// The region's name in the IR, the plan JSON and the reports.
constexpr const char *regionName(MemoryRegion region) {
  constexpr const char *kNames[] = {
      "arena",  "parameters", "gradients", "optimizer_state",
      "inputs", "workspace",  "buffers"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kMemoryRegionCount);
  return kNames[int(region)];
}

/// The base pointer that generated code names the region by (A, P, G, S,
/// I, W, B: StepMemory's fields and the CUDA kernels' Regions).
constexpr char regionLetter(MemoryRegion region) {
  constexpr const char kLetters[] = "APGSIWB";
  static_assert(sizeof(kLetters) - 1 == kMemoryRegionCount);
  return kLetters[int(region)];
}

/// The region named `name` (regionName's inverse); false if there is none.
inline bool parseRegionName(const char *name, MemoryRegion &region) {
  for (int r = 0; r < kMemoryRegionCount; ++r)
    if (std::strcmp(name, regionName(MemoryRegion(r))) == 0) {
      region = MemoryRegion(r);
      return true;
    }
  return false;
}

} // namespace mnemo

#endif // MNEMO_RUNTIME_MEMORYREGION_H
