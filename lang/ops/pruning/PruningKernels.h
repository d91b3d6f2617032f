//===- PruningKernels.h - Pruning masks on the CPU --------------*- C++ -*-===//
//
// The mask update of `prune_masks` and the zeroing of `apply_mask` for the
// CPU trainer (the emission model, PruningEmission.cpp, includes this
// header where a model prunes), and the mask rules the inference-weight
// compressor replays (runtime/InferenceWeights.cpp). The CUDA kernels,
// PruningKernels.cuh, follow the same rules, PruningFormulas.h, in one
// thread block; the reference interpreter sorts instead
// (PruningReference.h). Part of the runtime side of the family: plain
// C++17, no LLVM.
//
// The k smallest keys are found by radix selection (four passes of 256-bin
// histograms over the keys, recomputed each pass), so an update needs no
// memory beyond the masks: the step's plan stays exact.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_PRUNING_PRUNINGKERNELS_H
#define MNEMO_LANG_OPS_PRUNING_PRUNINGKERNELS_H

#include "lang/ops/pruning/PruningFormulas.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace mnemo {
namespace prune {

enum class Method { Magnitude, Structured, NM };

struct Spec {
  Method method = Method::Magnitude;
  double sparsity = 0; // final sparsity (magnitude, structured)
  int64_t start = 0, end = 0, every = 1;
  bool l1 = false; // structured: rank rows by L1 (else L2) norm
  int64_t dim = 0; // structured: the dimension whose slices go
  int n = 2, m = 4;
};

/// One pruned tensor: f32 weights and its mask (updated in place).
struct Target {
  const float *weight;
  uint32_t *mask;
  const int64_t *shape;
  int rank;
  int64_t count() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= shape[d];
    return n;
  }
};

inline int64_t maskWords(int64_t elements) { return (elements + 31) / 32; }

inline bool bitOf(const uint32_t *mask, int64_t i) {
  return (mask[i >> 5] >> (i & 31)) & 1u;
}

/// The k-th smallest key (k >= 1) of those that `forEachKey(visit)` visits,
/// and how many of the keys equal to it (in visiting order) are among the
/// k smallest.
template <typename ForEachKey>
void selectSmallest(int64_t k, ForEachKey forEachKey, unsigned *threshold,
                    unsigned long long *ties) {
  unsigned long long rank = (unsigned long long)(k - 1);
  unsigned prefix = 0, known = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    unsigned long long histogram[256] = {};
    forEachKey([&](unsigned key) {
      if ((key & known) == prefix)
        ++histogram[(key >> shift) & 255u];
    });
    prefix |= pickBin(histogram, &rank) << shift;
    known |= 255u << shift;
  }
  *threshold = prefix;
  *ties = rank + 1;
}

/// Unstructured magnitude pruning of the tensors together (one tensor for
/// per-layer scope): the `sparsity` fraction of smallest |w| over all.
inline void magnitudeMasks(Target *targets, int count, double sparsity) {
  int64_t total = 0;
  for (int t = 0; t < count; ++t)
    total += targets[t].count();
  int64_t k = prunedCount(sparsity, total);
  auto forEachKey = [&](auto visit) {
    for (int t = 0; t < count; ++t)
      for (int64_t e = 0, n = targets[t].count(); e < n; ++e)
        visit(pruneKey(std::fabs(targets[t].weight[e]),
                       bitOf(targets[t].mask, e)));
  };
  unsigned threshold = 0;
  unsigned long long ties = 0;
  if (k > 0)
    selectSmallest(k, forEachKey, &threshold, &ties);
  unsigned long long tiesTaken = 0;
  for (int t = 0; t < count; ++t) {
    const Target &x = targets[t];
    int64_t n = x.count();
    for (int64_t w = 0; w < maskWords(n); ++w) {
      uint32_t word = 0;
      for (int j = 0; j < 32 && w * 32 + j < n; ++j) {
        int64_t e = w * 32 + j;
        if (k == 0)
          break;
        unsigned key = pruneKey(std::fabs(x.weight[e]), bitOf(x.mask, e));
        bool pruned = key < threshold;
        if (key == threshold && tiesTaken < ties) {
          pruned = true;
          ++tiesTaken;
        }
        word |= uint32_t(pruned) << j;
      }
      x.mask[w] = word;
    }
  }
}

/// Structured pruning of one tensor: the `sparsity` fraction of its
/// slices along `dim` with the smallest L1 or L2 norm (summed in double,
/// in index order, as the CUDA kernel does).
inline void structuredMasks(const Target &x, double sparsity, int64_t dim,
                            bool l1) {
  int64_t slices = x.shape[dim], inner = 1, outer = 1;
  for (int d = int(dim) + 1; d < x.rank; ++d)
    inner *= x.shape[d];
  for (int d = 0; d < int(dim); ++d)
    outer *= x.shape[d];
  auto keyAt = [&](int64_t s) {
    double sum = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        float v = x.weight[(o * slices + s) * inner + i];
        sum += l1 ? std::fabs(double(v)) : double(v) * double(v);
      }
    return pruneKey(float(sum), bitOf(x.mask, s * inner));
  };
  int64_t k = prunedCount(sparsity, slices);
  std::vector<char> pruned(slices, 0);
  if (k > 0) {
    unsigned threshold = 0;
    unsigned long long ties = 0, taken = 0;
    selectSmallest(
        k,
        [&](auto visit) {
          for (int64_t s = 0; s < slices; ++s)
            visit(keyAt(s));
        },
        &threshold, &ties);
    for (int64_t s = 0; s < slices; ++s) {
      unsigned key = keyAt(s);
      pruned[s] = key < threshold || (key == threshold && taken++ < ties);
    }
  }
  int64_t n = x.count();
  for (int64_t w = 0; w < maskWords(n); ++w) {
    uint32_t word = 0;
    for (int j = 0; j < 32 && w * 32 + j < n; ++j)
      word |= uint32_t(pruned[((w * 32 + j) / inner) % slices]) << j;
    x.mask[w] = word;
  }
}

/// N:M pruning of one tensor: in each group of m consecutive elements
/// (m divides 32, so groups never straddle a mask word), the m - n
/// smallest |w|.
inline void nmMasks(const Target &x, int n, int m) {
  int64_t elements = x.count();
  for (int64_t w = 0; w < maskWords(elements); ++w) {
    uint32_t word = 0;
    for (int g = 0; g < 32 && w * 32 + g < elements; g += m) {
      unsigned keys[32];
      for (int j = 0; j < m; ++j) {
        int64_t e = w * 32 + g + j;
        keys[j] = pruneKey(std::fabs(x.weight[e]), bitOf(x.mask, e));
      }
      word |= nmGroupPruned(keys, m, n) << g;
    }
    x.mask[w] = word;
  }
}

/// The sparsity a step prunes to, or false when it does not update masks.
inline bool scheduledSparsity(const Spec &spec, int64_t step,
                              double *sparsity) {
  return scheduledSparsity(step, spec.start, spec.end, spec.every,
                           spec.method == Method::NM
                               ? 1.0 - double(spec.n) / double(spec.m)
                               : spec.sparsity,
                           sparsity);
}

/// The mask update of one `prune_masks` op at step `step`: returns false
/// (and leaves the masks) when the schedule does not prune at this step.
/// Magnitude pruning treats all targets as one pool (a per-layer directive
/// makes one op per tensor).
inline bool updateMasks(const Spec &spec, int64_t step, Target *targets,
                        int count) {
  double sparsity = 0;
  if (!scheduledSparsity(spec, step, &sparsity))
    return false;
  switch (spec.method) {
  case Method::Magnitude:
    magnitudeMasks(targets, count, sparsity);
    break;
  case Method::Structured:
    for (int t = 0; t < count; ++t)
      structuredMasks(targets[t], sparsity, spec.dim, spec.l1);
    break;
  case Method::NM:
    for (int t = 0; t < count; ++t)
      nmMasks(targets[t], spec.n, spec.m);
    break;
  }
  return true;
}

/// Zeroes the elements of `data` (elementBytes each) whose mask bit is set.
inline void applyMask(int64_t n, int elementBytes, const void *in,
                      const uint32_t *mask, void *out) {
  if (in != out)
    std::memmove(out, in, size_t(n) * size_t(elementBytes));
  auto *bytes = static_cast<uint8_t *>(out);
  for (int64_t i = 0; i < n; ++i)
    if (bitOf(mask, i))
      std::memset(bytes + i * elementBytes, 0, size_t(elementBytes));
}

} // namespace prune

namespace cpu {

/// `prune_masks`: each target's new mask (`mask`) starts as its old one
/// (`masks[t]`) and is recomputed at the steps the schedule names; returns
/// 1 at those steps, else 0.
inline int32_t pruneMasks(const prune::Spec &spec, int64_t step, int count,
                          prune::Target *targets,
                          const uint32_t *const *masks) {
  for (int t = 0; t < count; ++t)
    if (masks[t] != targets[t].mask)
      std::memcpy(targets[t].mask, masks[t],
                  sizeof(uint32_t) * prune::maskWords(targets[t].count()));
  return prune::updateMasks(spec, step, targets, count) ? 1 : 0;
}

/// `apply_mask`: zeroes the elements whose mask bit is set (in place when
/// `in == out`); with `when` pointing at 0, copies `in` (nothing in place).
inline void applyMask(int64_t n, int elementBytes, const void *in,
                      const uint32_t *mask, void *out, const int32_t *when) {
  if (when && *when == 0) {
    if (in != out)
      std::memcpy(out, in, size_t(n) * size_t(elementBytes));
    return;
  }
  // Whole mask words per chunk, so chunks never share an output byte.
  parallelFor(prune::maskWords(n), 4096, [&](int64_t first, int64_t last) {
    int64_t begin = first * 32, end = std::min(n, last * 32);
    size_t offset = size_t(begin) * size_t(elementBytes);
    prune::applyMask(end - begin, elementBytes,
                     static_cast<const uint8_t *>(in) + offset, mask + first,
                     static_cast<uint8_t *>(out) + offset);
  });
}

} // namespace cpu
} // namespace mnemo

#endif // MNEMO_LANG_OPS_PRUNING_PRUNINGKERNELS_H
