//===- PruningKernels.cuh - Pruning masks on the GPU -----------*- CUDA -*-===//
//
// The device functions the generated kernels call for apply_mask (a grid
// over the elements) and prune_masks (one thread block: masks change every
// `every` steps, and one block needs no grid-wide synchronization for the
// radix selection). The rules are PruningFormulas.h's, as the CPU kernels'
// (PruningKernels.h), so both backends prune the same elements. Included
// by the generated kernel source after runtime/cuda/Kernels.cuh, whose
// Regions, TensorRef and regionBase it uses; NVRTC is given it and the
// formulas by name (runtime/cuda/MnemoCuda.cmake).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_PRUNING_PRUNINGKERNELS_CUH
#define MNEMO_LANG_OPS_PRUNING_PRUNINGKERNELS_CUH

#include "lang/ops/pruning/PruningFormulas.h"

namespace mnemo::cuda {

/// `apply_mask` on elements of `Bits` (uint32_t for f32, uint16_t for
/// 16-bit floats, uint8_t for 8-bit codes): zero bits are zero.
template <typename Bits>
__device__ void applyMask(int64_t n, const Bits *in, const uint32_t *mask,
                          Bits *out, const int32_t *when) {
  // `when` 0: the input as it is (in place, nothing to do).
  bool masking = !when || *when != 0;
  if (!masking && in == out)
    return;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = masking && ((mask[i >> 5] >> (i & 31)) & 1u) ? Bits(0) : in[i];
}

/// One pruned tensor of a `prune_masks` op: its weight, its mask and new
/// mask, and (structured pruning) its slices along the pruned dim.
struct PruneRef {
  TensorRef weight, mask, newMask;
  int64_t slices, inner;
};

/// The most slices a structured target may have on the GPU (one bit each
/// in shared memory).
constexpr int kMaxPruneSlices = 65536;

__device__ __forceinline__ bool maskBit(const uint32_t *mask, int64_t i) {
  return (mask[i >> 5] >> (i & 31)) & 1u;
}

/// A structured slice's key: its L1 or L2 (squared) norm summed in double
/// in index order by one thread, as the host does it.
__device__ unsigned sliceKey(const float *w, const uint32_t *mask,
                             const PruneRef &t, int64_t s, bool l1) {
  int64_t outer = t.weight.count / (t.slices * t.inner);
  double sum = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < t.inner; ++i) {
      double v = w[(o * t.slices + s) * t.inner + i];
      sum += l1 ? fabs(v) : v * v;
    }
  return prune::pruneKey(float(sum), maskBit(mask, s * t.inner));
}

/// Exclusive prefix sum of `value` over the block (at most 1024 threads);
/// `total` gets the block's sum.
__device__ unsigned long long blockExclusiveScan(unsigned long long value,
                                                 unsigned long long *total) {
  __shared__ unsigned long long scan[1024];
  scan[threadIdx.x] = value;
  __syncthreads();
  for (unsigned offset = 1; offset < blockDim.x; offset <<= 1) {
    unsigned long long add =
        threadIdx.x >= offset ? scan[threadIdx.x - offset] : 0;
    __syncthreads();
    scan[threadIdx.x] += add;
    __syncthreads();
  }
  unsigned long long exclusive = scan[threadIdx.x] - value;
  *total = scan[blockDim.x - 1];
  __syncthreads();
  return exclusive;
}

/// `prune_masks` in one thread block: masks are rare updates (every
/// `every` steps), and one block needs no grid-wide synchronization for
/// the radix selection. Other steps copy the masks, when not in place.
/// method: 0 magnitude (the targets as one pool), 1 structured, 2 N:M.
__device__ void pruneMasks(const Regions &r, const PruneRef *targets, int count,
                           const int64_t *step, int method, double sparsity,
                           long long start, long long end, long long every,
                           bool l1, int n, int m, int32_t *updated) {
  auto weightOf = [&](const PruneRef &t) {
    return reinterpret_cast<const float *>(regionBase(r, t.weight.region) +
                                           t.weight.offset);
  };
  auto maskOf = [&](const PruneRef &t) {
    return reinterpret_cast<uint32_t *>(regionBase(r, t.newMask.region) +
                                        t.newMask.offset);
  };
  // The new masks start as the old ones; the rules read them from there.
  for (int t = 0; t < count; ++t) {
    const uint32_t *from = reinterpret_cast<const uint32_t *>(
        regionBase(r, targets[t].mask.region) + targets[t].mask.offset);
    uint32_t *to = maskOf(targets[t]);
    if (from != to)
      for (int64_t w = threadIdx.x; w < targets[t].mask.count; w += blockDim.x)
        to[w] = from[w];
  }
  __syncthreads();
  double target = 0;
  if (!prune::scheduledSparsity(
          *step, start, end, every,
          method == 2 ? 1.0 - double(n) / double(m) : sparsity, &target)) {
    if (threadIdx.x == 0)
      *updated = 0;
    return;
  }
  if (threadIdx.x == 0)
    *updated = 1;

  if (method == 2) { // N:M: each thread takes whole mask words
    for (int t = 0; t < count; ++t) {
      const float *w = weightOf(targets[t]);
      uint32_t *mask = maskOf(targets[t]);
      int64_t elements = targets[t].weight.count;
      for (int64_t word = threadIdx.x; word < targets[t].mask.count;
           word += blockDim.x) {
        uint32_t bits = 0;
        for (int g = 0; g < 32 && word * 32 + g < elements; g += m) {
          unsigned keys[32];
          for (int j = 0; j < m; ++j) {
            int64_t e = word * 32 + g + j;
            keys[j] = prune::pruneKey(fabsf(w[e]), maskBit(mask, e));
          }
          bits |= prune::nmGroupPruned(keys, m, n) << g;
        }
        mask[word] = bits;
      }
    }
    return;
  }

  // The k-th smallest key by radix selection: four 256-bin histograms.
  __shared__ unsigned long long histogram[256];
  __shared__ unsigned long long rankShared;
  __shared__ unsigned prefixShared;
  __shared__ unsigned long long taken;
  auto select = [&](long long k, auto forEachKey) {
    if (threadIdx.x == 0) {
      rankShared = (unsigned long long)(k - 1);
      prefixShared = 0;
    }
    unsigned known = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = threadIdx.x; b < 256; b += blockDim.x)
        histogram[b] = 0;
      __syncthreads();
      unsigned prefix = prefixShared;
      forEachKey([&](unsigned key) {
        if ((key & known) == prefix)
          atomicAdd(&histogram[(key >> shift) & 255u], 1ull);
      });
      __syncthreads();
      if (threadIdx.x == 0) {
        unsigned long long rank = rankShared;
        prefixShared |= prune::pickBin(histogram, &rank) << shift;
        rankShared = rank;
      }
      known |= 255u << shift;
      __syncthreads();
    }
  };

  if (method == 1) { // structured, one target at a time
    __shared__ uint32_t pruned[kMaxPruneSlices / 32];
    for (int t = 0; t < count; ++t) {
      const PruneRef &x = targets[t];
      const float *w = weightOf(x);
      uint32_t *mask = maskOf(x);
      long long k = prune::prunedCount(target, x.slices);
      for (int64_t i = threadIdx.x; i < (x.slices + 31) / 32; i += blockDim.x)
        pruned[i] = 0;
      __syncthreads();
      if (k > 0) {
        select(k, [&](auto visit) {
          for (int64_t s = threadIdx.x; s < x.slices; s += blockDim.x)
            visit(sliceKey(w, mask, x, s, l1));
        });
        // Ties in slice order: one thread (slices are few).
        if (threadIdx.x == 0) {
          unsigned long long ties = rankShared + 1, tiesTaken = 0;
          for (int64_t s = 0; s < x.slices; ++s) {
            unsigned key = sliceKey(w, mask, x, s, l1);
            if (key < prefixShared ||
                (key == prefixShared && tiesTaken++ < ties))
              pruned[s >> 5] |= 1u << (s & 31);
          }
        }
        __syncthreads();
      }
      for (int64_t word = threadIdx.x; word < x.mask.count;
           word += blockDim.x) {
        uint32_t bits = 0;
        for (int j = 0; j < 32 && word * 32 + j < x.weight.count; ++j) {
          int64_t s = ((word * 32 + j) / x.inner) % x.slices;
          bits |= ((pruned[s >> 5] >> (s & 31)) & 1u) << j;
        }
        mask[word] = bits;
      }
      __syncthreads();
    }
    return;
  }

  // Magnitude: the targets as one pool, ties in index order.
  long long total = 0;
  for (int t = 0; t < count; ++t)
    total += targets[t].weight.count;
  long long k = prune::prunedCount(target, total);
  if (k > 0)
    select(k, [&](auto visit) {
      for (int t = 0; t < count; ++t) {
        const float *w = weightOf(targets[t]);
        const uint32_t *mask = maskOf(targets[t]);
        for (int64_t e = threadIdx.x; e < targets[t].weight.count;
             e += blockDim.x)
          visit(prune::pruneKey(fabsf(w[e]), maskBit(mask, e)));
      }
    });
  unsigned threshold = prefixShared;
  unsigned long long ties = k > 0 ? rankShared + 1 : 0;
  if (threadIdx.x == 0)
    taken = 0;
  __syncthreads();
  for (int t = 0; t < count; ++t) {
    const float *w = weightOf(targets[t]);
    uint32_t *mask = maskOf(targets[t]);
    int64_t elements = targets[t].weight.count, words = targets[t].mask.count;
    for (int64_t base = 0; base < words; base += blockDim.x) {
      int64_t word = base + threadIdx.x;
      uint32_t less = 0, equal = 0;
      if (word < words && k > 0)
        for (int j = 0; j < 32 && word * 32 + j < elements; ++j) {
          int64_t e = word * 32 + j;
          unsigned key = prune::pruneKey(fabsf(w[e]), maskBit(mask, e));
          less |= uint32_t(key < threshold) << j;
          equal |= uint32_t(key == threshold) << j;
        }
      unsigned long long chunkTies = 0;
      unsigned long long before = blockExclusiveScan(__popc(equal), &chunkTies);
      if (word < words) {
        unsigned long long rank = taken + before;
        for (int j = 0; j < 32; ++j)
          if ((equal >> j) & 1u) {
            if (rank < ties)
              less |= 1u << j;
            ++rank;
          }
        mask[word] = less;
      }
      __syncthreads();
      if (threadIdx.x == 0)
        taken += chunkTies;
      __syncthreads();
    }
  }
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_PRUNING_PRUNINGKERNELS_CUH
