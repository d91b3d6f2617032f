//===- PruningReference.h - The interpreter's own pruning rules -*- C++ -*-===//
//
// The reference for `prune_masks` and `apply_mask`, written from the ops'
// definition (PruningOps.td) and torch.nn.utils.prune, independently of the
// trainer's radix selection (PruningKernels.h): the pruned elements are the
// first k of a stable sort, so the differential tests compare two
// implementations. Masks here are one bool per element; the interpreter's
// model (PruningInterpreter.cpp) converts from and to the runtime's 32-bit
// words. Plain C++, no MLIR: the runtime's tests compare the trainer's
// rules with these too.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_PRUNING_PRUNINGREFERENCE_H
#define MNEMO_LANG_OPS_PRUNING_PRUNINGREFERENCE_H

#include <cstdint>
#include <optional>
#include <vector>

namespace mnemo::reference {

/// The sparsity step `step` (1-based) prunes to, or none when it does not
/// update the masks: Zhu & Gupta's cubic schedule from `start` to `end`,
/// updating every `every` steps and at `end` (one-shot when end <= start).
std::optional<double> scheduledSparsity(int64_t step, int64_t start,
                                        int64_t end, int64_t every,
                                        double finalSparsity);

/// How many of `count` elements `sparsity` prunes: Python's round(), half
/// to even, as torch.nn.utils.prune computes it.
int64_t prunedCount(double sparsity, int64_t count);

/// One pruned tensor: its weights (f32 values) and mask, updated in place.
struct PruneTarget {
  std::vector<double> weight;
  std::vector<int64_t> shape;
  std::vector<bool> pruned;
};

/// Unstructured magnitude pruning of the targets as one pool.
void pruneByMagnitude(std::vector<PruneTarget> &targets, double sparsity);

/// Structured pruning: the slices along `dim` with the smallest L1 or L2
/// norm.
void pruneStructured(PruneTarget &target, double sparsity, int64_t dim,
                     bool l1);

/// N:M pruning: m - n of every m consecutive elements.
void pruneNofM(PruneTarget &target, int n, int m);

} // namespace mnemo::reference

#endif // MNEMO_LANG_OPS_PRUNING_PRUNINGREFERENCE_H
