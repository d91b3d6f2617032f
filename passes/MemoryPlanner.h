//===- MemoryPlanner.h - Offsets of buffers by lifetime ---------*- C++ -*-===//
//
// Dynamic storage allocation with everything known in advance: each buffer
// has a size and a live interval over the schedule, and gets an offset in
// one arena so that no two buffers live at the same time overlap. The arena
// can never be smaller than the lower bound (the most bytes live at once);
// the planners get close to it:
//
// - planGreedy: place buffers one by one, in decreasing size or decreasing
//   lifetime, each into the best-fitting gap among the time-overlapping
//   buffers already placed (TFLite's arena planner, XLA's heap simulator).
// - planHeuristic: both greedy orders, keeping the smaller arena.
// - planExact: branch and bound over "gravity-normal" placements (every
//   buffer rests at 0 or on a time-overlapping buffer), in the spirit of
//   Google's MiniMalloc; optimal when it finishes within its node limit.
//
// Plain C++ with no MLIR: the IR side (passes/PlanMemory.cpp) turns values
// into intervals and plans back into attributes.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_MEMORYPLANNER_H
#define MNEMO_PASSES_MEMORYPLANNER_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mnemo {

/// A buffer live from step `start` to step `end`, inclusive.
struct BufferInterval {
  int64_t start = 0, end = 0;
  int64_t size = 0; // bytes
};

struct MemoryPlan {
  std::vector<int64_t> offsets; // one per interval
  int64_t arenaBytes = 0;
  std::string method; // "greedy-by-size", "greedy-by-lifetime", "exact"
};

/// Arena offsets are multiples of this (cache lines, vector loads, cuBLAS).
constexpr int64_t kArenaAlignment = 256;

inline int64_t alignUp(int64_t bytes, int64_t alignment = kArenaAlignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

/// The most bytes live at any one step: no arena can be smaller.
int64_t lowerBound(const std::vector<BufferInterval> &buffers);

/// Sum of all sizes: the arena without any reuse.
int64_t naiveBytes(const std::vector<BufferInterval> &buffers);

enum class GreedyOrder { BySize, ByLifetime, ByArea };

MemoryPlan planGreedy(const std::vector<BufferInterval> &buffers,
                      GreedyOrder order);

/// Best-fit placement of the buffers in the given order.
MemoryPlan planInOrder(const std::vector<BufferInterval> &buffers,
                       const std::vector<size_t> &order);

/// The greedy orders; the smaller arena.
MemoryPlan planHeuristic(const std::vector<BufferInterval> &buffers);

/// Improves a greedy plan by local search over its placement order: swaps
/// two buffers' places in the order and keeps the swap when the arena does
/// not grow, until the arena meets the lower bound or the placements tried
/// have compared `workLimit` pairs of buffers (n(n-1)/2 a placement).
/// Bounded by work, not by time, and with a fixed-seed generator, so the
/// plan is a function of the buffers alone: every compilation of a model
/// gives the same offsets, however loaded the machine (the host code and
/// the CUDA kernels are emitted by separate runs and must agree). `order`
/// is the order `plan` was placed in.
MemoryPlan improvePlacementOrder(const std::vector<BufferInterval> &buffers,
                                 MemoryPlan plan, std::vector<size_t> order,
                                 int64_t workLimit);

/// The smallest arena, or nullopt if the search visits more than
/// `nodeLimit` nodes (it then returns nothing rather than a worse answer;
/// a node limit rather than a time limit keeps the result deterministic).
/// Starts from `incumbent` when given, to prune with it.
std::optional<MemoryPlan> planExact(const std::vector<BufferInterval> &buffers,
                                    int64_t nodeLimit,
                                    const MemoryPlan *incumbent = nullptr);

/// Checks that every buffer fits in the arena and that no two buffers that
/// are live at the same step overlap in memory. On failure `error` names
/// the pair.
bool verifyPlan(const std::vector<BufferInterval> &buffers,
                const MemoryPlan &plan, std::string &error);

} // namespace mnemo

#endif // MNEMO_PASSES_MEMORYPLANNER_H
