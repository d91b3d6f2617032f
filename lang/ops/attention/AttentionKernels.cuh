//===- AttentionKernels.cuh - Fused attention on the GPU -------*- CUDA -*-===//
//
// Mnemo's own tiled attention kernels, for every type and head dimension up
// to 256 (cuDNN's fused flash attention, for the shapes it takes, is the
// fast path to come): MaxD / 32 threads per query row (forward, query
// gradient) or per key row (key and value gradients), each holding 32 of
// the row's elements and its accumulators in registers (loops of
// compile-time length, fully unrolled), key or query tiles staged in shared
// memory, the online softmax of AttentionFormulas.h in f32, one rescale per
// chunk of 8 keys. (The first version indexed arrays of the bound with
// run-time loops, which put them in local memory: 11 ms for a GPT-2-small
// layer's forward on an H200, 1.2 TFLOP/s; docs/performance.md.) The
// backward is three deterministic launches and no atomics: rowsum(dO * O),
// then the key/value gradients per key tile, then the query gradients per
// query tile, each recomputing the probabilities from the log-sum-exp.
// Included by the generated kernel source after runtime/cuda/Kernels.cuh
// (ld, st); NVRTC is given it and the formulas by name.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_ATTENTION_ATTENTIONKERNELS_CUH
#define MNEMO_LANG_OPS_ATTENTION_ATTENTIONKERNELS_CUH

#include "lang/ops/attention/AttentionFormulas.h"

namespace mnemo::cuda {

__device__ __forceinline__ float attentionMaskValue(unsigned char m) {
  return m;
}
template <typename M> __device__ __forceinline__ float attentionMaskValue(M m) {
  return ld(m);
}

/// The scaled score with the causal rule and the mask: -inf where hidden.
template <typename MaskT>
__device__ __forceinline__ float
attentionMaskedScore(float score, const attention::AttentionGeometry &g,
                     const MaskT *mask, long long b, long long h, long long i,
                     long long j) {
  if (attention::causallyHidden(g, i, j))
    return -INFINITY;
  if (!mask)
    return score;
  float m = attentionMaskValue(mask[attention::maskOffset(g, b, h, i, j)]);
  if (g.maskKind == attention::kBooleanMask)
    return m != 0 ? score : -INFINITY;
  return score + m;
}

/// Each thread holds kCudaSliceWidth consecutive elements of a row (its
/// query, key or value, and its accumulators) in registers: the loops over
/// them have compile-time bounds and unroll fully. A row of a MaxD-bounded
/// head is MaxD / kCudaSliceWidth neighbouring threads of one warp, which sum
/// their partial dot products with xor shuffles. Every thread of the block
/// reaches every shuffle and barrier (threads past the last row compute on
/// zeros and store nothing).
template <int Lanes> __device__ __forceinline__ float attentionRowSum(float x) {
#pragma unroll
  for (int offset = 1; offset < Lanes; offset *= 2)
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

/// A slice's dot product with a tile row's matching slice.
__device__ __forceinline__ float attentionSliceDot(const float *slice,
                                                   const float *tileRow) {
  float x = 0;
#pragma unroll
  for (int d = 0; d < attention::kCudaSliceWidth; ++d)
    x += slice[d] * tileRow[d];
  return x;
}

/// slice += factor * tileRow.
__device__ __forceinline__ void attentionSliceAdd(float *slice, float factor,
                                                  const float *tileRow) {
#pragma unroll
  for (int d = 0; d < attention::kCudaSliceWidth; ++d)
    slice[d] += factor * tileRow[d];
}

/// Rows [0, count) of a row-major [*, cols] matrix, times `scale`, into a
/// [Rows, MaxD] tile in shared memory; zero past `cols` and `count`, so
/// that whole slices of any row can be read.
template <int MaxD, int Rows, typename T>
__device__ __forceinline__ void
attentionLoadTile(float *tile, const T *rows, long long count, long long cols,
                  float scale = 1.0f) {
  for (int n = threadIdx.x; n < Rows * MaxD; n += blockDim.x) {
    int r = n / MaxD, d = n % MaxD;
    tile[n] = r < count && d < cols ? ld(rows[r * cols + d]) * scale : 0.0f;
  }
}

/// This thread's slice of row `row` of a [*, cols] matrix, times `scale`
/// (zero past `cols`, and for a row that does not exist).
template <typename T>
__device__ __forceinline__ void
attentionLoadSlice(float *slice, const T *m, long long row, bool exists,
                   long long cols, int first, float scale = 1.0f) {
#pragma unroll
  for (int d = 0; d < attention::kCudaSliceWidth; ++d)
    slice[d] = exists && first + d < cols
                   ? ld(m[row * cols + first + d]) * scale
                   : 0.0f;
}

/// Stores this thread's slice of row `row` of a [*, cols] matrix, times
/// `scale`.
template <typename T>
__device__ __forceinline__ void
attentionStoreSlice(T *m, const float *slice, long long row, long long cols,
                    int first, float scale = 1.0f) {
#pragma unroll
  for (int d = 0; d < attention::kCudaSliceWidth; ++d)
    if (first + d < cols)
      m[row * cols + first + d] = st<T>(slice[d] * scale);
}

/// Keys whose scores a forward thread takes at once: one online-softmax
/// rescale per chunk instead of per key.
constexpr int kAttentionScoreChunk = 8;

/// Forward: block (query rows, batch * head), Lanes threads per query row;
/// key and value tiles of KeyTile rows in shared memory.
template <typename T, typename MaskT, int MaxD, int KeyTile>
__device__ void attentionForward(const T *q, const T *k, const T *v,
                                 const MaskT *mask, T *out, float *logSumExp,
                                 attention::AttentionGeometry g,
                                 long long dropoutStep) {
  constexpr int Lanes = MaxD / attention::kCudaSliceWidth;
  static_assert(KeyTile % kAttentionScoreChunk == 0, "whole chunks");
  __shared__ __align__(16) float kTile[KeyTile * MaxD];
  __shared__ __align__(16) float vTile[KeyTile * MaxD];
  const long long D = g.headDim, Dv = g.valueDim;
  const long long bh = blockIdx.y, b = bh / g.heads, h = bh % g.heads;
  const long long kvh = b * g.kvHeads + attention::kvHeadOf(g, h);
  const long long rowsPerBlock = blockDim.x / Lanes;
  const long long first = (long long)blockIdx.x * rowsPerBlock;
  const long long i = first + threadIdx.x / Lanes;
  const int slice = threadIdx.x % Lanes * attention::kCudaSliceWidth;
  const bool active = i < g.queries;
  const T *kHead = k + kvh * g.keys * D, *vHead = v + kvh * g.keys * Dv;
  float qSlice[attention::kCudaSliceWidth], acc[attention::kCudaSliceWidth];
  attentionLoadSlice(qSlice, q, bh * g.queries + i, active, D, slice,
                     float(g.scale));
#pragma unroll
  for (int e = 0; e < attention::kCudaSliceWidth; ++e)
    acc[e] = 0;
  float rowMax = -INFINITY, rowSum = 0;
  long long last =
      first + rowsPerBlock < g.queries ? first + rowsPerBlock : g.queries;
  long long keyEnd = g.causal && last < g.keys ? last : g.keys;
  for (long long j0 = 0; j0 < keyEnd; j0 += KeyTile) {
    int cols = int(keyEnd - j0 < KeyTile ? keyEnd - j0 : KeyTile);
    __syncthreads();
    attentionLoadTile<MaxD, KeyTile>(kTile, kHead + j0 * D, cols, D);
    attentionLoadTile<MaxD, KeyTile>(vTile, vHead + j0 * Dv, cols, Dv);
    __syncthreads();
    for (int c0 = 0; c0 < cols; c0 += kAttentionScoreChunk) {
      float s[kAttentionScoreChunk];
      float chunkMax = -INFINITY;
#pragma unroll
      for (int u = 0; u < kAttentionScoreChunk; ++u) {
        float x = attentionRowSum<Lanes>(
            attentionSliceDot(qSlice, kTile + (c0 + u) * MaxD + slice));
        s[u] = active && c0 + u < cols
                   ? attentionMaskedScore(x, g, mask, b, h, i, j0 + c0 + u)
                   : -INFINITY;
        chunkMax = fmaxf(chunkMax, s[u]);
      }
      float factor = attention::absorbTileMax(rowMax, chunkMax);
      if (attention::isMinusInfinity(rowMax))
        continue; // no visible key yet (no shuffle follows in this chunk)
      if (factor != 1.0f) {
        rowSum *= factor;
#pragma unroll
        for (int e = 0; e < attention::kCudaSliceWidth; ++e)
          acc[e] *= factor;
      }
#pragma unroll
      for (int u = 0; u < kAttentionScoreChunk; ++u) {
        float p = elementwise::fastExp(s[u] - rowMax);
        rowSum += p;
        if (p != 0)
          p *= attention::dropoutFactor<float>(
              g, dropoutStep,
              attention::probabilityIndex(g, b, h, i, j0 + c0 + u));
        attentionSliceAdd(acc, p, vTile + (c0 + u) * MaxD + slice);
      }
    }
  }
  if (!active)
    return;
  float inverse = rowSum > 0 ? 1.0f / rowSum : 0.0f;
  attentionStoreSlice(out, acc, bh * g.queries + i, Dv, slice, inverse);
  if (slice == 0)
    logSumExp[bh * g.queries + i] = attention::logSumExp(rowMax, rowSum);
}

/// Backward, first: delta = rowsum(dO * O) per query row, a thread a row.
template <typename T>
__device__ void attentionBackwardDelta(const T *out, const T *gradOut,
                                       float *delta, long long rows,
                                       long long Dv) {
  long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows)
    return;
  float sum = 0;
#pragma unroll 4
  for (long long e = 0; e < Dv; ++e)
    sum += ld(gradOut[r * Dv + e]) * ld(out[r * Dv + e]);
  delta[r] = sum;
}

/// Backward, second: block (key rows, batch * key/value head), Lanes
/// threads per key row; the group's query tiles (queries scaled, output
/// gradients) in shared memory. dV = sum P~^T dO, dK = sum dS^T (scale Q).
template <typename T, typename MaskT, int MaxD, int QueryTile>
__device__ void
attentionBackwardKeys(const T *q, const T *k, const T *v,
                      const float *logSumExp, const float *delta,
                      const T *gradOut, const MaskT *mask, T *gradK, T *gradV,
                      attention::AttentionGeometry g, long long dropoutStep) {
  constexpr int Lanes = MaxD / attention::kCudaSliceWidth;
  constexpr int W = attention::kCudaSliceWidth;
  __shared__ __align__(16) float qTile[QueryTile * MaxD];
  __shared__ __align__(16) float doTile[QueryTile * MaxD];
  __shared__ float lseTile[QueryTile], deltaTile[QueryTile];
  const long long D = g.headDim, Dv = g.valueDim;
  const long long kvh = blockIdx.y, b = kvh / g.kvHeads;
  const long long group = g.heads / g.kvHeads;
  const long long rowsPerBlock = blockDim.x / Lanes;
  const long long first = (long long)blockIdx.x * rowsPerBlock;
  const long long j = first + threadIdx.x / Lanes;
  const int slice = threadIdx.x % Lanes * W;
  const bool active = j < g.keys;
  float kSlice[W], vSlice[W], dk[W], dv[W];
  attentionLoadSlice(kSlice, k, kvh * g.keys + j, active, D, slice);
  attentionLoadSlice(vSlice, v, kvh * g.keys + j, active, Dv, slice);
#pragma unroll
  for (int d = 0; d < W; ++d)
    dk[d] = dv[d] = 0;
  // Causal: queries before the block's first key see none of its keys.
  long long queryStart = g.causal ? first / QueryTile * QueryTile : 0;
  for (long long member = 0; member < group; ++member) {
    long long h = (kvh % g.kvHeads) * group + member, bh = b * g.heads + h;
    for (long long i0 = queryStart; i0 < g.queries; i0 += QueryTile) {
      int rows = int(g.queries - i0 < QueryTile ? g.queries - i0 : QueryTile);
      __syncthreads();
      attentionLoadTile<MaxD, QueryTile>(qTile, q + (bh * g.queries + i0) * D,
                                         rows, D, float(g.scale));
      attentionLoadTile<MaxD, QueryTile>(
          doTile, gradOut + (bh * g.queries + i0) * Dv, rows, Dv);
      for (int n = threadIdx.x; n < rows; n += blockDim.x) {
        lseTile[n] = logSumExp[bh * g.queries + i0 + n];
        deltaTile[n] = delta[bh * g.queries + i0 + n];
      }
      __syncthreads();
      for (int r = 0; r < rows; ++r) {
        long long i = i0 + r;
        const float *qRow = qTile + r * MaxD + slice;
        const float *doRow = doTile + r * MaxD + slice;
        float x = attentionRowSum<Lanes>(attentionSliceDot(kSlice, qRow));
        float dpDropped =
            attentionRowSum<Lanes>(attentionSliceDot(vSlice, doRow));
        if (!active)
          continue;
        float p = attention::probability(
            attentionMaskedScore(x, g, mask, b, h, i, j), lseTile[r]);
        if (p == 0)
          continue;
        float z = attention::dropoutFactor<float>(
            g, dropoutStep, attention::probabilityIndex(g, b, h, i, j));
        float ds = p * (z * dpDropped - deltaTile[r]);
        attentionSliceAdd(dv, z * p, doRow);
        attentionSliceAdd(dk, ds, qRow);
      }
    }
  }
  if (!active)
    return;
  attentionStoreSlice(gradK, dk, kvh * g.keys + j, D, slice);
  attentionStoreSlice(gradV, dv, kvh * g.keys + j, Dv, slice);
}

/// Backward, third: block (query rows, batch * head), Lanes threads per
/// query row; key and value tiles in shared memory. dQ = scale * sum dS K.
template <typename T, typename MaskT, int MaxD, int KeyTile>
__device__ void attentionBackwardQueries(const T *q, const T *k, const T *v,
                                         const float *logSumExp,
                                         const float *delta, const T *gradOut,
                                         const MaskT *mask, T *gradQ,
                                         attention::AttentionGeometry g,
                                         long long dropoutStep) {
  constexpr int Lanes = MaxD / attention::kCudaSliceWidth;
  constexpr int W = attention::kCudaSliceWidth;
  __shared__ __align__(16) float kTile[KeyTile * MaxD];
  __shared__ __align__(16) float vTile[KeyTile * MaxD];
  const long long D = g.headDim, Dv = g.valueDim;
  const long long bh = blockIdx.y, b = bh / g.heads, h = bh % g.heads;
  const long long kvh = b * g.kvHeads + attention::kvHeadOf(g, h);
  const long long rowsPerBlock = blockDim.x / Lanes;
  const long long first = (long long)blockIdx.x * rowsPerBlock;
  const long long i = first + threadIdx.x / Lanes;
  const int slice = threadIdx.x % Lanes * W;
  const bool active = i < g.queries;
  const T *kHead = k + kvh * g.keys * D, *vHead = v + kvh * g.keys * Dv;
  float qSlice[W], doSlice[W], dq[W];
  attentionLoadSlice(qSlice, q, bh * g.queries + i, active, D, slice,
                     float(g.scale));
  attentionLoadSlice(doSlice, gradOut, bh * g.queries + i, active, Dv, slice);
#pragma unroll
  for (int d = 0; d < W; ++d)
    dq[d] = 0;
  float lse = active ? logSumExp[bh * g.queries + i] : 0;
  float rowDelta = active ? delta[bh * g.queries + i] : 0;
  long long last =
      first + rowsPerBlock < g.queries ? first + rowsPerBlock : g.queries;
  long long keyEnd = g.causal && last < g.keys ? last : g.keys;
  for (long long j0 = 0; j0 < keyEnd; j0 += KeyTile) {
    int cols = int(keyEnd - j0 < KeyTile ? keyEnd - j0 : KeyTile);
    __syncthreads();
    attentionLoadTile<MaxD, KeyTile>(kTile, kHead + j0 * D, cols, D);
    attentionLoadTile<MaxD, KeyTile>(vTile, vHead + j0 * Dv, cols, Dv);
    __syncthreads();
    for (int c = 0; c < cols; ++c) {
      const float *kRow = kTile + c * MaxD + slice;
      float x = attentionRowSum<Lanes>(attentionSliceDot(qSlice, kRow));
      float dpDropped = attentionRowSum<Lanes>(
          attentionSliceDot(doSlice, vTile + c * MaxD + slice));
      if (!active)
        continue;
      float p = attention::probability(
          attentionMaskedScore(x, g, mask, b, h, i, j0 + c), lse);
      if (p == 0)
        continue;
      float z = attention::dropoutFactor<float>(
          g, dropoutStep, attention::probabilityIndex(g, b, h, i, j0 + c));
      float ds = p * (z * dpDropped - rowDelta);
      attentionSliceAdd(dq, ds, kRow);
    }
  }
  if (!active)
    return;
  attentionStoreSlice(gradQ, dq, bh * g.queries + i, D, slice, float(g.scale));
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_ATTENTION_ATTENTIONKERNELS_CUH
