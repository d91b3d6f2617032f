//===- PruningFormulas.h - Pruning rules, element by element -*- C++ -*-===//
//
// The trainer's pruning rules, shared by the CPU kernels and the CUDA
// kernels; the reference interpreter has its own
// (PruningReference.h). NVRTC is given this file by name
// (runtime/cuda/MnemoCuda.cmake), so it includes nothing. The rules:
//
// - when a step updates the masks, and to which sparsity (Zhu & Gupta's
//   cubic schedule, "To prune, or not to prune", 2017);
// - how many elements a sparsity prunes (PyTorch's round(amount * n));
// - the order in which elements are pruned: a 32-bit key, smallest first,
//   with ties broken by the lower index, so every backend picks the same
//   elements. Elements pruned before sort first, so masks only grow;
// - N:M groups: which m - n of m neighbours go.
//
// A mask is one bit per element in 32-bit words: bit j of word w is element
// 32 w + j; a set bit marks a pruned element (so zero-initialized state
// prunes nothing).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_PRUNING_PRUNINGFORMULAS_H
#define MNEMO_LANG_OPS_PRUNING_PRUNINGFORMULAS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MNEMO_PRUNE_HD __host__ __device__
#define MNEMO_PRUNE_RINT(x) rint(x)
#else
#define MNEMO_PRUNE_HD
#define MNEMO_PRUNE_RINT(x) __builtin_rint(x)
#endif

namespace mnemo::prune {

/// Whether step `step` (1-based) updates the masks, and the sparsity it
/// prunes to. Updates happen at `start`, every `every` steps after it, and
/// at `end`; between them the sparsity grows as
///   s(t) = s_f (1 - (1 - (t - start) / (end - start))^3),
/// so the first update prunes nothing and the last one reaches `final`.
/// With end <= start, pruning is one-shot at `start` (a start of 0 means
/// the first step).
MNEMO_PRUNE_HD inline bool scheduledSparsity(long long step, long long start,
                                             long long end, long long every,
                                             double finalSparsity,
                                             double *sparsity) {
  long long first = start > 1 ? start : 1;
  long long last = end > first ? end : first;
  if (step < first || step > last)
    return false;
  if ((step - first) % every != 0 && step != last)
    return false;
  if (last == first) {
    *sparsity = finalSparsity;
    return true;
  }
  double remaining = 1.0 - double(step - first) / double(last - first);
  *sparsity = finalSparsity * (1.0 - remaining * remaining * remaining);
  return true;
}

/// How many of `count` elements (or rows) a sparsity prunes: the nearest
/// integer, half to even, as torch.nn.utils.prune's Python round(amount * n)
/// (rint in the default rounding mode).
MNEMO_PRUNE_HD inline long long prunedCount(double sparsity, long long count) {
  long long k = (long long)MNEMO_PRUNE_RINT(sparsity * double(count));
  return k < 0 ? 0 : (k > count ? count : k);
}

/// The pruning order of an element (or row) of magnitude `magnitude`
/// (>= 0; a NaN sorts last): elements pruned before come first, then by
/// magnitude. Non-negative floats order as their bit patterns.
MNEMO_PRUNE_HD inline unsigned pruneKey(float magnitude, bool prunedBefore) {
  if (prunedBefore)
    return 0u;
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
  unsigned bits = __float_as_uint(magnitude);
#else
  unsigned bits;
  __builtin_memcpy(&bits, &magnitude, sizeof bits);
#endif
  return (bits & 0x7fffffffu) + 1u;
}

/// The pruned members of one N:M group, as bits (bit j: member j): the
/// m - n smallest keys, ties to the lower index. m <= 32.
MNEMO_PRUNE_HD inline unsigned nmGroupPruned(const unsigned *keys, int m,
                                             int n) {
  unsigned pruned = 0;
  for (int r = 0; r < m - n; ++r) {
    int best = -1;
    for (int j = 0; j < m; ++j)
      if (!((pruned >> j) & 1u) && (best < 0 || keys[j] < keys[best]))
        best = j;
    pruned |= 1u << best;
  }
  return pruned;
}

/// One step of the radix selection of the k-th smallest key: given the
/// histogram of the next 8 bits among the keys that match the prefix so
/// far, the bin where the element of 0-based `rank` lies; `rank` becomes
/// its rank within that bin. After four steps (bits 31..24 down to 7..0)
/// the prefix is the key itself and `rank` counts the equal keys before it.
MNEMO_PRUNE_HD inline unsigned pickBin(const unsigned long long *histogram,
                                       unsigned long long *rank) {
  for (unsigned bin = 0; bin < 255; ++bin) {
    if (*rank < histogram[bin])
      return bin;
    *rank -= histogram[bin];
  }
  return 255;
}

} // namespace mnemo::prune

#endif // MNEMO_LANG_OPS_PRUNING_PRUNINGFORMULAS_H
