//===- AttentionWorkspace.h - Fused attention's tiles and slots -*- C++ -*-===//
//
// How the CPU kernels (AttentionKernels.h) cut the problem, stated once so
// that the plan (AttentionOps.cpp's getCpuWorkspaceBytes) reserves exactly
// what they use: query tiles of up to 64 rows against key tiles of up to
// 64 keys, in f32, in one workspace slot per concurrent task. The forward's
// task is a (batch, head, query tile); the backward's a (batch, key/value
// head), which owns its keys' and values' gradients and those of the
// queries of its group, so no two tasks write the same element. Slots are
// at most kCpuSlots: tasks beyond them queue on a slot, and the workspace
// stays a few MiB whatever the batch. And the CUDA backward's scratch: one
// f32 per query row (rowsum(dO * O)).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_ATTENTION_ATTENTIONWORKSPACE_H
#define MNEMO_LANG_OPS_ATTENTION_ATTENTIONWORKSPACE_H

#include "lang/ops/attention/AttentionFormulas.h"

#include <algorithm>
#include <cstdint>

namespace mnemo {
namespace attention {

constexpr int64_t kCpuQueryTile = 64, kCpuKeyTile = 64;
/// The most tasks in flight: past the cores of the machines the CPU
/// trainer runs on, more slots only grow the workspace.
constexpr int64_t kCpuSlots = 32;

inline int64_t cpuQueryTile(const AttentionGeometry &g) {
  return std::min<int64_t>(kCpuQueryTile, g.queries);
}
inline int64_t cpuKeyTile(const AttentionGeometry &g) {
  return std::min<int64_t>(kCpuKeyTile, g.keys);
}
inline int64_t cpuTasks(const AttentionGeometry &g, bool backward) {
  if (backward)
    return g.batch * g.kvHeads;
  int64_t br = cpuQueryTile(g);
  return g.batch * g.heads * ((g.queries + br - 1) / br);
}
inline int64_t cpuSlots(const AttentionGeometry &g, bool backward) {
  return std::max<int64_t>(1, std::min(kCpuSlots, cpuTasks(g, backward)));
}

/// One slot's floats. Forward: the query tile (scaled), the key tile
/// transposed, the value tile, the scores, the output accumulator, and each
/// row's running maximum and sum. Backward: the query and output-gradient
/// tiles, the key tile both ways, the value tile transposed, the
/// probabilities and their gradient, the head's rowsum(dO * O), and f32
/// accumulators of the query gradient (one head) and of the key and value
/// gradients (the key/value head).
inline int64_t cpuSlotFloats(const AttentionGeometry &g, bool backward) {
  int64_t br = cpuQueryTile(g), bc = cpuKeyTile(g), d = g.headDim,
          dv = g.valueDim;
  if (!backward)
    return br * d + d * bc + bc * dv + br * bc + br * dv + 2 * br;
  return br * d + br * dv + 2 * bc * d + dv * bc + 2 * br * bc + g.queries +
         g.queries * d + g.keys * (d + dv);
}

inline int64_t cpuWorkspaceFloats(const AttentionGeometry &g, bool backward) {
  return cpuSlots(g, backward) * cpuSlotFloats(g, backward);
}

/// Threads (rows) per block of the CUDA kernels.
constexpr int kCudaRowsPerBlock = 64;

inline int64_t cudaBackwardScratchBytes(const AttentionGeometry &g) {
  return (g.batch * g.heads * g.queries * 4 + 255) / 256 * 256;
}

} // namespace attention
} // namespace mnemo

#endif // MNEMO_LANG_OPS_ATTENTION_ATTENTIONWORKSPACE_H
