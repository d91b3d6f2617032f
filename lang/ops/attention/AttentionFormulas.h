//===- AttentionFormulas.h - What fused attention computes ------*- C++ -*-===//
//
// The problem fused attention solves, stated once for every implementation:
// its sizes, which keys a query sees (the causal rule and the mask), the
// dropout mask's index and scale, and the online softmax's update. The
// reference interpreter (AttentionInterpreter.cpp) evaluates them in
// double over whole rows, the CPU kernels (AttentionKernels.h) and the
// CUDA kernels (AttentionKernels.cuh, to which NVRTC gives this file by
// name) in f32 tile by tile.
//
// It includes nothing but the elementwise formulas (dropout's hash): NVRTC
// compiles without a C++ standard library.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_ATTENTION_ATTENTIONFORMULAS_H
#define MNEMO_LANG_OPS_ATTENTION_ATTENTIONFORMULAS_H

#include "lang/ops/elementwise/ElementwiseFormulas.h"

namespace mnemo::attention {

/// What the mask operand is: none, added to the scores, or a boolean that
/// keeps the keys where it is true.
enum AttentionMaskKind : int {
  kNoMask = 0,
  kAdditiveMask = 1,
  kBooleanMask = 2
};

/// One attention problem, flattened: `batch` is the product of the
/// dimensions before the heads. The mask is addressed through strides (0
/// along a dimension it broadcasts over). Generated code spells it as an
/// aggregate, so the fields' order is part of the emission
/// (AttentionEmission.cpp).
struct AttentionGeometry {
  long long batch, heads, kvHeads, queries, keys, headDim, valueDim;
  bool causal;
  double scale, dropoutP;
  long long seed;
  int maskKind;
  long long maskBatchStride, maskHeadStride, maskQueryStride, maskKeyStride;
};

/// Elements of a row each thread of the CUDA kernels holds in registers
/// (AttentionKernels.cuh): a head of MaxD elements is MaxD / kCudaSliceWidth
/// threads per row.
constexpr int kCudaSliceWidth = 32;

/// Threads per block of the CUDA kernels; a block takes
/// kCudaAttentionThreads / (MaxD / kCudaSliceWidth) rows.
constexpr int kCudaAttentionThreads = 128;

/// The CUDA workspace of a 16-bit attention on cuDNN's engines
/// (AttentionCudnn.h): the backward's row dots (one f32 per query row,
/// rounded up to 256 bytes), an f32 query-gradient accumulator of
/// [rows, headDim], and as much again for cuDNN's own workspace (its flash
/// backward accumulates the query gradient there). A site whose plans ask
/// for more runs Mnemo's kernels.
MNEMO_FORMULA long long cudnnRowDotBytes(long long rows) {
  return (rows * 4 + 255) / 256 * 256;
}
MNEMO_FORMULA long long cudnnScratchBytes(long long rows, long long headDim) {
  return cudnnRowDotBytes(rows) + rows * headDim * 4;
}
MNEMO_FORMULA long long cudnnWorkspaceBytes(long long rows, long long headDim) {
  return cudnnScratchBytes(rows, headDim) + rows * headDim * 4;
}

/// The key/value head query head `h` reads (grouped-query attention).
MNEMO_FORMULA long long kvHeadOf(const AttentionGeometry &g, long long h) {
  return h / (g.heads / g.kvHeads);
}

/// Whether the causal rule hides key j from query i (torch's is_causal:
/// the top-left-aligned lower triangle).
MNEMO_FORMULA bool causallyHidden(const AttentionGeometry &g, long long i,
                                  long long j) {
  return g.causal && j > i;
}

/// The element of the mask that scores (b, h, i, j) read.
MNEMO_FORMULA long long maskOffset(const AttentionGeometry &g, long long b,
                                   long long h, long long i, long long j) {
  return b * g.maskBatchStride + h * g.maskHeadStride + i * g.maskQueryStride +
         j * g.maskKeyStride;
}

/// The index of probability (b, h, i, j) in [batch, heads, queries, keys]:
/// what a mnemo.dropout of the written-out probabilities would draw for it.
MNEMO_FORMULA long long probabilityIndex(const AttentionGeometry &g,
                                         long long b, long long h, long long i,
                                         long long j) {
  return ((b * g.heads + h) * g.queries + i) * g.keys + j;
}

/// The factor dropout applies to probability `index` at `step`: 0 where it
/// is dropped, 1 / (1 - p) where kept; 1 without dropout.
template <typename T>
MNEMO_FORMULA T dropoutFactor(const AttentionGeometry &g, long long step,
                              long long index) {
  if (g.dropoutP == 0)
    return T(1);
  return elementwise::dropoutUniform(g.seed, step, index) < g.dropoutP
             ? T(0)
             : T(1.0 / (1.0 - g.dropoutP));
}

/// Whether a score, maximum or log-sum-exp is -inf: a hidden key, or a row
/// with none visible (compared, not spelled: NVRTC has no <limits>).
template <typename T> MNEMO_FORMULA bool isMinusInfinity(T x) {
  return x < T(-3.0e38f);
}

/// The online softmax's step: the running maximum `rowMax` (-inf before
/// the first visible key) absorbs a tile's maximum; returns the factor that
/// rescales the row's partial sum and output (0 while they are empty).
template <typename T, typename M = elementwise::FastMath>
MNEMO_FORMULA T absorbTileMax(T &rowMax, T tileMax) {
  if (!(tileMax > rowMax))
    return T(1);
  T factor = isMinusInfinity(rowMax) ? T(0) : M::exp(rowMax - tileMax);
  rowMax = tileMax;
  return factor;
}

/// A row's log-sum-exp from its maximum and its sum of exp(s - max); a row
/// with no visible key keeps its maximum, -inf.
template <typename T, typename M = elementwise::FastMath>
MNEMO_FORMULA T logSumExp(T rowMax, T rowSum) {
  return rowSum > T(0) ? rowMax + M::log(rowSum) : rowMax;
}

/// A probability recomputed from its scaled, masked score and its row's
/// log-sum-exp: 0 for a hidden key (exp(-inf)) and in a row with none
/// visible.
template <typename T, typename M = elementwise::FastMath>
MNEMO_FORMULA T probability(T score, T rowLogSumExp) {
  return isMinusInfinity(rowLogSumExp) ? T(0) : M::exp(score - rowLogSumExp);
}

} // namespace mnemo::attention

#endif // MNEMO_LANG_OPS_ATTENTION_ATTENTIONFORMULAS_H
