//===- AttentionKernels.cuh - Fused attention on the GPU -------*- CUDA -*-===//
//
// Mnemo's own tiled attention kernels, for every type and head dimension up
// to 256 (cuDNN's fused flash attention, for the shapes it takes, is the
// fast path to come): a thread per query row (forward, query gradient) or
// per key row (key and value gradients), key or query tiles staged in
// shared memory, the online softmax of AttentionFormulas.h in f32. Each
// thread's rows (its query or key, its accumulators) are arrays of the
// head-dimension bound that the loops over the head dimension index: they
// unroll by 4 only, so the arrays stay in local memory (L1) instead of
// claiming 4 x 64 registers a thread and spilling. The
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

namespace mnemo {
namespace cuda {

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

/// Forward: block (query tile, batch * head), a thread per query row; key
/// and value tiles of KeyTile rows in shared memory.
template <typename T, typename MaskT, int MaxD, int KeyTile>
__device__ void attentionForward(const T *q, const T *k, const T *v,
                                 const MaskT *mask, T *out, float *logSumExp,
                                 attention::AttentionGeometry g,
                                 long long dropoutStep) {
  __shared__ float kTile[KeyTile * MaxD];
  __shared__ float vTile[KeyTile * MaxD];
  const long long D = g.headDim, Dv = g.valueDim;
  const long long bh = blockIdx.y, b = bh / g.heads, h = bh % g.heads;
  const long long kvh = b * g.kvHeads + attention::kvHeadOf(g, h);
  const long long first = (long long)blockIdx.x * blockDim.x;
  const long long i = first + threadIdx.x;
  const bool active = i < g.queries;
  const T *kHead = k + kvh * g.keys * D, *vHead = v + kvh * g.keys * Dv;
  float qRow[MaxD], acc[MaxD];
#pragma unroll 4
  for (long long d = 0; d < D; ++d)
    qRow[d] = active ? ld(q[(bh * g.queries + i) * D + d]) * float(g.scale) : 0;
#pragma unroll 4
  for (long long e = 0; e < Dv; ++e)
    acc[e] = 0;
  float rowMax = -INFINITY, rowSum = 0;
  long long last =
      first + blockDim.x < g.queries ? first + blockDim.x : g.queries;
  long long keyEnd = g.causal && last < g.keys ? last : g.keys;
  for (long long j0 = 0; j0 < keyEnd; j0 += KeyTile) {
    int cols = int(keyEnd - j0 < KeyTile ? keyEnd - j0 : KeyTile);
    __syncthreads();
    for (long long n = threadIdx.x; n < cols * D; n += blockDim.x)
      kTile[n] = ld(kHead[j0 * D + n]);
    for (long long n = threadIdx.x; n < cols * Dv; n += blockDim.x)
      vTile[n] = ld(vHead[j0 * Dv + n]);
    __syncthreads();
    if (!active)
      continue;
    float s[KeyTile];
    float tileMax = -INFINITY;
    for (int c = 0; c < cols; ++c) {
      float x = 0;
#pragma unroll 4
      for (long long d = 0; d < D; ++d)
        x += qRow[d] * kTile[c * D + d];
      s[c] = attentionMaskedScore(x, g, mask, b, h, i, j0 + c);
      tileMax = fmaxf(tileMax, s[c]);
    }
    float factor = attention::absorbTileMax(rowMax, tileMax);
    if (attention::isMinusInfinity(rowMax))
      continue;
    if (factor != 1.0f) {
      rowSum *= factor;
#pragma unroll 4
      for (long long e = 0; e < Dv; ++e)
        acc[e] *= factor;
    }
    for (int c = 0; c < cols; ++c) {
      float p = elementwise::fastExp(s[c] - rowMax);
      rowSum += p;
      p *= attention::dropoutFactor<float>(
          g, dropoutStep, attention::probabilityIndex(g, b, h, i, j0 + c));
      if (p != 0)
#pragma unroll 4
        for (long long e = 0; e < Dv; ++e)
          acc[e] += p * vTile[c * Dv + e];
    }
  }
  if (!active)
    return;
  float inverse = rowSum > 0 ? 1.0f / rowSum : 0.0f;
#pragma unroll 4
  for (long long e = 0; e < Dv; ++e)
    out[(bh * g.queries + i) * Dv + e] = st<T>(acc[e] * inverse);
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

/// Backward, second: block (key tile, batch * key/value head), a thread per
/// key row; the group's query tiles (queries scaled, output gradients) in
/// shared memory. dV = sum P~^T dO, dK = sum dS^T (scale Q).
template <typename T, typename MaskT, int MaxD, int QueryTile>
__device__ void
attentionBackwardKeys(const T *q, const T *k, const T *v,
                      const float *logSumExp, const float *delta,
                      const T *gradOut, const MaskT *mask, T *gradK, T *gradV,
                      attention::AttentionGeometry g, long long dropoutStep) {
  __shared__ float qTile[QueryTile * MaxD];
  __shared__ float doTile[QueryTile * MaxD];
  __shared__ float lseTile[QueryTile], deltaTile[QueryTile];
  const long long D = g.headDim, Dv = g.valueDim;
  const long long kvh = blockIdx.y, b = kvh / g.kvHeads;
  const long long group = g.heads / g.kvHeads;
  const long long first = (long long)blockIdx.x * blockDim.x;
  const long long j = first + threadIdx.x;
  const bool active = j < g.keys;
  float kRow[MaxD], vRow[MaxD], dk[MaxD], dv[MaxD];
#pragma unroll 4
  for (long long d = 0; d < D; ++d) {
    kRow[d] = active ? ld(k[(kvh * g.keys + j) * D + d]) : 0;
    dk[d] = 0;
  }
#pragma unroll 4
  for (long long e = 0; e < Dv; ++e) {
    vRow[e] = active ? ld(v[(kvh * g.keys + j) * Dv + e]) : 0;
    dv[e] = 0;
  }
  // Causal: queries before the tile's first key see none of it.
  long long queryStart = g.causal ? first / QueryTile * QueryTile : 0;
  for (long long member = 0; member < group; ++member) {
    long long h = (kvh % g.kvHeads) * group + member, bh = b * g.heads + h;
    for (long long i0 = queryStart; i0 < g.queries; i0 += QueryTile) {
      int rows = int(g.queries - i0 < QueryTile ? g.queries - i0 : QueryTile);
      __syncthreads();
      for (long long n = threadIdx.x; n < rows * D; n += blockDim.x)
        qTile[n] = ld(q[(bh * g.queries + i0) * D + n]) * float(g.scale);
      for (long long n = threadIdx.x; n < rows * Dv; n += blockDim.x)
        doTile[n] = ld(gradOut[(bh * g.queries + i0) * Dv + n]);
      for (long long n = threadIdx.x; n < rows; n += blockDim.x) {
        lseTile[n] = logSumExp[bh * g.queries + i0 + n];
        deltaTile[n] = delta[bh * g.queries + i0 + n];
      }
      __syncthreads();
      if (!active)
        continue;
      for (int r = 0; r < rows; ++r) {
        long long i = i0 + r;
        float x = 0, dpDropped = 0;
#pragma unroll 4
        for (long long d = 0; d < D; ++d)
          x += qTile[r * D + d] * kRow[d];
        float p = attention::probability(
            attentionMaskedScore(x, g, mask, b, h, i, j), lseTile[r]);
        if (p == 0)
          continue;
        float z = attention::dropoutFactor<float>(
            g, dropoutStep, attention::probabilityIndex(g, b, h, i, j));
#pragma unroll 4
        for (long long e = 0; e < Dv; ++e)
          dpDropped += doTile[r * Dv + e] * vRow[e];
        float ds = p * (z * dpDropped - deltaTile[r]);
#pragma unroll 4
        for (long long e = 0; e < Dv; ++e)
          dv[e] += z * p * doTile[r * Dv + e];
#pragma unroll 4
        for (long long d = 0; d < D; ++d)
          dk[d] += ds * qTile[r * D + d];
      }
    }
  }
  if (!active)
    return;
#pragma unroll 4
  for (long long d = 0; d < D; ++d)
    gradK[(kvh * g.keys + j) * D + d] = st<T>(dk[d]);
#pragma unroll 4
  for (long long e = 0; e < Dv; ++e)
    gradV[(kvh * g.keys + j) * Dv + e] = st<T>(dv[e]);
}

/// Backward, third: block (query tile, batch * head), a thread per query
/// row; key and value tiles in shared memory. dQ = scale * sum dS K.
template <typename T, typename MaskT, int MaxD, int KeyTile>
__device__ void attentionBackwardQueries(const T *q, const T *k, const T *v,
                                         const float *logSumExp,
                                         const float *delta, const T *gradOut,
                                         const MaskT *mask, T *gradQ,
                                         attention::AttentionGeometry g,
                                         long long dropoutStep) {
  __shared__ float kTile[KeyTile * MaxD];
  __shared__ float vTile[KeyTile * MaxD];
  const long long D = g.headDim, Dv = g.valueDim;
  const long long bh = blockIdx.y, b = bh / g.heads, h = bh % g.heads;
  const long long kvh = b * g.kvHeads + attention::kvHeadOf(g, h);
  const long long first = (long long)blockIdx.x * blockDim.x;
  const long long i = first + threadIdx.x;
  const bool active = i < g.queries;
  const T *kHead = k + kvh * g.keys * D, *vHead = v + kvh * g.keys * Dv;
  float qRow[MaxD], doRow[MaxD], dq[MaxD];
#pragma unroll 4
  for (long long d = 0; d < D; ++d) {
    qRow[d] = active ? ld(q[(bh * g.queries + i) * D + d]) * float(g.scale) : 0;
    dq[d] = 0;
  }
#pragma unroll 4
  for (long long e = 0; e < Dv; ++e)
    doRow[e] = active ? ld(gradOut[(bh * g.queries + i) * Dv + e]) : 0;
  float lse = active ? logSumExp[bh * g.queries + i] : 0;
  float rowDelta = active ? delta[bh * g.queries + i] : 0;
  long long last =
      first + blockDim.x < g.queries ? first + blockDim.x : g.queries;
  long long keyEnd = g.causal && last < g.keys ? last : g.keys;
  for (long long j0 = 0; j0 < keyEnd; j0 += KeyTile) {
    int cols = int(keyEnd - j0 < KeyTile ? keyEnd - j0 : KeyTile);
    __syncthreads();
    for (long long n = threadIdx.x; n < cols * D; n += blockDim.x)
      kTile[n] = ld(kHead[j0 * D + n]);
    for (long long n = threadIdx.x; n < cols * Dv; n += blockDim.x)
      vTile[n] = ld(vHead[j0 * Dv + n]);
    __syncthreads();
    if (!active)
      continue;
    for (int c = 0; c < cols; ++c) {
      float x = 0, dpDropped = 0;
#pragma unroll 4
      for (long long d = 0; d < D; ++d)
        x += qRow[d] * kTile[c * D + d];
      float p = attention::probability(
          attentionMaskedScore(x, g, mask, b, h, i, j0 + c), lse);
      if (p == 0)
        continue;
      float z = attention::dropoutFactor<float>(
          g, dropoutStep, attention::probabilityIndex(g, b, h, i, j0 + c));
#pragma unroll 4
      for (long long e = 0; e < Dv; ++e)
        dpDropped += doRow[e] * vTile[c * Dv + e];
      float ds = p * (z * dpDropped - rowDelta);
#pragma unroll 4
      for (long long d = 0; d < D; ++d)
        dq[d] += ds * kTile[c * D + d];
    }
  }
  if (!active)
    return;
#pragma unroll 4
  for (long long d = 0; d < D; ++d)
    gradQ[(bh * g.queries + i) * D + d] = st<T>(dq[d] * float(g.scale));
}

} // namespace cuda
} // namespace mnemo

#endif // MNEMO_LANG_OPS_ATTENTION_ATTENTIONKERNELS_CUH
