//===- AttentionKernels.h - Fused attention on the CPU ----------*- C++ -*-===//
//
// The CPU kernels generated code calls for attention and attention_grad:
// FlashAttention-2's tiling on a CPU. The forward walks a query tile over
// key tiles with an online softmax and keeps only the output and each
// row's log-sum-exp; the backward recomputes each tile's probabilities
// from the log-sum-exp. Tiles wholly above a causal diagonal are skipped.
// Everything runs in f32 in the plan's workspace, one slot per task in
// flight (the tiles and slots below), so no thread ever holds more than a tile
// of the [Tq, Tk] scores. The tile products are sgemm calls (the runtime's
// gemm, OpenBLAS where the trainer has it), single-threaded inside each
// task, so a result does not depend on the thread count: a task's tiles
// and the order it visits them are fixed by the geometry alone. Part of the
// runtime side of the family: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_ATTENTION_ATTENTIONKERNELS_H
#define MNEMO_LANG_OPS_ATTENTION_ATTENTIONKERNELS_H

#include "lang/ops/attention/AttentionFormulas.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cstdint>
#include <limits>

//===----------------------------------------------------------------------===//
// Tiles and slots: how the kernels cut the problem, stated once so that the
// plan (AttentionOps.cpp's getCpuWorkspaceBytes) reserves exactly what
// they use. Query tiles of up to 64 rows meet key tiles of up to 64 keys,
// in f32, in one workspace slot per task in flight. The forward's task is
// a (batch, head, query tile); the backward's a (batch, key/value head),
// which owns its keys' and values' gradients and its group's queries', so
// no two tasks write the same element. At most kCpuSlots slots, and one
// per kCpuFlopsPerSlot of work: more tasks queue on them, and the
// workspace stays a few MiB whatever the batch (and small for a small
// problem, where it would outgrow the probabilities it replaces). The
// CUDA kernels' block size and the backward's scratch (one f32 per query
// row, rowsum(dO * O)) are here too, for the emitter and the plan.
//===----------------------------------------------------------------------===//

namespace mnemo::attention {

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
/// The tile products' FLOPs below which one more slot (and thread) does
/// not pay for its workspace: about a millisecond of one core.
constexpr int64_t kCpuFlopsPerSlot = 8'000'000;

inline int64_t cpuSlots(const AttentionGeometry &g, bool backward) {
  int64_t perPair =
      2 * (backward ? 3 * g.headDim + 2 * g.valueDim : g.headDim + g.valueDim);
  int64_t flops = g.batch * g.heads * g.queries * g.keys * perPair;
  int64_t byWork = (flops + kCpuFlopsPerSlot - 1) / kCpuFlopsPerSlot;
  return std::max<int64_t>(
      1, std::min<int64_t>({kCpuSlots, cpuTasks(g, backward), byWork}));
}
/// One slot's floats. Forward: the query tile (scaled), the key and value
/// tiles, the scores, the output accumulator, and each row's running
/// maximum and sum. Backward: the query and output-gradient tiles, the key
/// and value tiles, the probabilities and their gradient, the head's rowsum(dO * O), and f32
/// accumulators of the query gradient (one head) and of the key and value
/// gradients (the key/value head).
inline int64_t cpuSlotFloats(const AttentionGeometry &g, bool backward) {
  int64_t br = cpuQueryTile(g), bc = cpuKeyTile(g), d = g.headDim,
          dv = g.valueDim;
  if (!backward)
    return br * d + d * bc + bc * dv + br * bc + br * dv + 2 * br;
  return br * d + br * dv + bc * d + bc * dv + 2 * br * bc + g.queries +
         g.queries * d + g.keys * (d + dv);
}

inline int64_t cpuWorkspaceFloats(const AttentionGeometry &g, bool backward) {
  return cpuSlots(g, backward) * cpuSlotFloats(g, backward);
}

/// Rows (queries or keys) per block of the CUDA kernels
/// (AttentionKernels.cuh) for heads of at most `maxDim` elements.
constexpr int cudaRowsPerBlock(int maxDim) {
  return kCudaAttentionThreads / (maxDim / kCudaSliceWidth);
}

inline int64_t cudaBackwardScratchBytes(const AttentionGeometry &g) {
  return (g.batch * g.heads * g.queries * 4 + 255) / 256 * 256;
}

/// Whether the GPU may run this attention on cuDNN's flash-attention
/// engines (AttentionCudnn.h): 16-bit tensors and no mask operand (the
/// causal rule is part of the graph). The executor still falls back to
/// Mnemo's kernels where cuDNN has no engine.
inline bool cudnnCandidate(const AttentionGeometry &g, unsigned elementBits) {
  return elementBits == 16 && g.maskKind == kNoMask;
}

/// The CUDA scratch of an attention or attention_grad: Mnemo's backward's
/// row dots, and for a cuDNN candidate what cuDNN's plans are given.
inline int64_t cudaScratchBytes(const AttentionGeometry &g,
                                unsigned elementBits, bool backward) {
  int64_t ours = backward ? cudaBackwardScratchBytes(g) : 0;
  if (!cudnnCandidate(g, elementBits))
    return ours;
  return std::max<int64_t>(
      ours, cudnnWorkspaceBytes(g.batch * g.heads * g.queries, g.headDim));
}

} // namespace mnemo::attention

namespace mnemo::cpu {

namespace attention_detail {

using attention::AttentionGeometry;

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

/// A scaled score with the causal rule and the mask applied: -inf where
/// the key is hidden.
template <typename MaskT>
inline float maskedScore(float score, const AttentionGeometry &g,
                         const MaskT *mask, int64_t b, int64_t h, int64_t i,
                         int64_t j) {
  if (attention::causallyHidden(g, i, j))
    return kMinusInfinity;
  if (!mask)
    return score;
  MaskT m = mask[attention::maskOffset(g, b, h, i, j)];
  if (g.maskKind == attention::kBooleanMask)
    return m ? score : kMinusInfinity;
  return score + float(m);
}

/// Loads rows x cols of `src` (row stride cols) into f32, scaled.
template <typename T>
inline void loadRows(const T *src, float *dst, int64_t rows, int64_t cols,
                     float factor = 1.0f) {
  for (int64_t n = 0; n < rows * cols; ++n)
    dst[n] = float(src[n]) * factor;
}

} // namespace attention_detail

/// out = softmax(q k^T * scale + mask) (dropped out) v, and each query
/// row's log-sum-exp, as AttentionFormulas.h states them.
template <typename T, typename MaskT>
void attentionForward(const T *q, const T *k, const T *v, const MaskT *mask,
                      T *out, float *logSumExp,
                      const attention::AttentionGeometry &g,
                      int64_t dropoutStep, float *workspace) {
  using namespace attention_detail;
  const int64_t br = attention::cpuQueryTile(g), bc = attention::cpuKeyTile(g);
  const int64_t D = g.headDim, Dv = g.valueDim;
  const int64_t queryTiles = (g.queries + br - 1) / br;
  const int64_t tasks = attention::cpuTasks(g, false);
  const int64_t slots = attention::cpuSlots(g, false);
  const int64_t slotFloats = attention::cpuSlotFloats(g, false);
  const float scale = float(g.scale);
  parallelFor(slots, 1, [&](int64_t firstSlot, int64_t lastSlot) {
    for (int64_t slot = firstSlot; slot < lastSlot; ++slot) {
      float *qTile = workspace + slot * slotFloats; // [br][D], scaled
      float *kTile = qTile + br * D;                // [bc][D]
      float *vTile = kTile + bc * D;                // [bc][Dv]
      float *scores = vTile + bc * Dv;              // [br][bc]
      float *acc = scores + br * bc;                // [br][Dv]
      float *rowMax = acc + br * Dv, *rowSum = rowMax + br;
      for (int64_t task = slot; task < tasks; task += slots) {
        int64_t tile = task % queryTiles, bh = task / queryTiles;
        int64_t b = bh / g.heads, h = bh % g.heads;
        int64_t kvh = b * g.kvHeads + attention::kvHeadOf(g, h);
        int64_t i0 = tile * br, rows = std::min<int64_t>(br, g.queries - i0);
        const T *kHead = k + kvh * g.keys * D, *vHead = v + kvh * g.keys * Dv;
        loadRows(q + (bh * g.queries + i0) * D, qTile, rows, D, scale);
        std::fill(acc, acc + rows * Dv, 0.0f);
        std::fill(rowMax, rowMax + rows, kMinusInfinity);
        std::fill(rowSum, rowSum + rows, 0.0f);
        // Causal: keys past the tile's last query are hidden from all of it.
        int64_t keyEnd =
            g.causal ? std::min<int64_t>(g.keys, i0 + rows) : g.keys;
        for (int64_t j0 = 0; j0 < keyEnd; j0 += bc) {
          int64_t cols = std::min<int64_t>(bc, keyEnd - j0);
          loadRows(kHead + j0 * D, kTile, cols, D);
          loadRows(vHead + j0 * Dv, vTile, cols, Dv);
          gemm(false, true, rows, cols, D, 1.0f, qTile, D, kTile, D, 0.0f,
               scores, bc);
          for (int64_t r = 0; r < rows; ++r) {
            int64_t i = i0 + r;
            float *sr = scores + r * bc;
            float tileMax = kMinusInfinity;
            for (int64_t c = 0; c < cols; ++c) {
              sr[c] = maskedScore(sr[c], g, mask, b, h, i, j0 + c);
              tileMax = std::max(tileMax, sr[c]);
            }
            float factor = attention::absorbTileMax(rowMax[r], tileMax);
            if (attention::isMinusInfinity(rowMax[r]))
              continue; // nothing visible in the row yet
            float *ar = acc + r * Dv;
            if (factor != 1.0f) {
              rowSum[r] *= factor;
              for (int64_t e = 0; e < Dv; ++e)
                ar[e] *= factor;
            }
            float m = rowMax[r], sum = 0;
            for (int64_t c = 0; c < cols; ++c) {
              sr[c] = elementwise::fastExp(sr[c] - m);
              sum += sr[c];
            }
            rowSum[r] += sum;
            if (g.dropoutP != 0)
              for (int64_t c = 0; c < cols; ++c)
                sr[c] *= attention::dropoutFactor<float>(
                    g, dropoutStep,
                    attention::probabilityIndex(g, b, h, i, j0 + c));
          }
          // acc += P V for the tile's rows (rows with nothing visible yet
          // have P = 0 there: their scores were left -inf, exp gives 0).
          for (int64_t r = 0; r < rows; ++r)
            if (attention::isMinusInfinity(rowMax[r]))
              std::fill(scores + r * bc, scores + r * bc + cols, 0.0f);
          gemm(false, false, rows, Dv, cols, 1.0f, scores, bc, vTile, Dv, 1.0f,
               acc, Dv);
        }
        for (int64_t r = 0; r < rows; ++r) {
          float inverse = rowSum[r] > 0 ? 1.0f / rowSum[r] : 0.0f;
          T *o = out + (bh * g.queries + i0 + r) * Dv;
          for (int64_t e = 0; e < Dv; ++e)
            o[e] = T(acc[r * Dv + e] * inverse);
          logSumExp[bh * g.queries + i0 + r] =
              attention::logSumExp(rowMax[r], rowSum[r]);
        }
      }
    }
  });
}

/// The queries', keys' and values' gradients (FlashAttention-2's backward):
/// per (batch, key/value head), each key tile against each query tile of
/// the group's heads, the probabilities recomputed from the log-sum-exp.
template <typename T, typename MaskT>
void attentionBackward(const T *q, const T *k, const T *v, const T *out,
                       const float *logSumExp, const T *gradOut,
                       const MaskT *mask, T *gradQ, T *gradK, T *gradV,
                       const attention::AttentionGeometry &g,
                       int64_t dropoutStep, float *workspace) {
  using namespace attention_detail;
  const int64_t br = attention::cpuQueryTile(g), bc = attention::cpuKeyTile(g);
  const int64_t D = g.headDim, Dv = g.valueDim, Tq = g.queries, Tk = g.keys;
  const int64_t group = g.heads / g.kvHeads;
  const int64_t tasks = attention::cpuTasks(g, true);
  const int64_t slots = attention::cpuSlots(g, true);
  const int64_t slotFloats = attention::cpuSlotFloats(g, true);
  const float scale = float(g.scale);
  parallelFor(slots, 1, [&](int64_t firstSlot, int64_t lastSlot) {
    for (int64_t slot = firstSlot; slot < lastSlot; ++slot) {
      float *qTile = workspace + slot * slotFloats; // [br][D], scaled
      float *doTile = qTile + br * D;               // [br][Dv]
      float *kTile = doTile + br * Dv;              // [bc][D]
      float *vTile = kTile + bc * D;                // [bc][Dv]
      float *probs = vTile + bc * Dv;               // [br][bc]
      float *dScores = probs + br * bc;             // [br][bc]
      float *delta = dScores + br * bc;             // [Tq]
      float *dqAcc = delta + Tq;                    // [Tq][D]
      float *dkAcc = dqAcc + Tq * D;                // [Tk][D]
      float *dvAcc = dkAcc + Tk * D;                // [Tk][Dv]
      for (int64_t task = slot; task < tasks; task += slots) {
        int64_t b = task / g.kvHeads, kvh = task;
        const T *kHead = k + kvh * Tk * D, *vHead = v + kvh * Tk * Dv;
        std::fill(dkAcc, dkAcc + Tk * (D + Dv), 0.0f);
        for (int64_t member = 0; member < group; ++member) {
          int64_t h = (task % g.kvHeads) * group + member, bh = b * g.heads + h;
          const T *qHead = q + bh * Tq * D, *oHead = out + bh * Tq * Dv,
                  *doHead = gradOut + bh * Tq * Dv;
          const float *lseHead = logSumExp + bh * Tq;
          // rowsum(dO * O) = rowsum(P * dP): softmax's backward term.
          for (int64_t i = 0; i < Tq; ++i) {
            float sum = 0;
            for (int64_t e = 0; e < Dv; ++e)
              sum += float(doHead[i * Dv + e]) * float(oHead[i * Dv + e]);
            delta[i] = sum;
          }
          std::fill(dqAcc, dqAcc + Tq * D, 0.0f);
          for (int64_t j0 = 0; j0 < Tk; j0 += bc) {
            int64_t cols = std::min<int64_t>(bc, Tk - j0);
            loadRows(kHead + j0 * D, kTile, cols, D);
            loadRows(vHead + j0 * Dv, vTile, cols, Dv);
            for (int64_t i0 = 0; i0 < Tq; i0 += br) {
              int64_t rows = std::min<int64_t>(br, Tq - i0);
              if (g.causal && i0 + rows - 1 < j0)
                continue; // every key of the tile is past every query
              loadRows(qHead + i0 * D, qTile, rows, D, scale);
              loadRows(doHead + i0 * Dv, doTile, rows, Dv);
              gemm(false, true, rows, cols, D, 1.0f, qTile, D, kTile, D, 0.0f,
                   probs, bc);
              gemm(false, true, rows, cols, Dv, 1.0f, doTile, Dv, vTile, Dv,
                   0.0f, dScores, bc);
              for (int64_t r = 0; r < rows; ++r) {
                int64_t i = i0 + r;
                float *pr = probs + r * bc, *dr = dScores + r * bc;
                for (int64_t c = 0; c < cols; ++c) {
                  float p = attention::probability(
                      maskedScore(pr[c], g, mask, b, h, i, j0 + c), lseHead[i]);
                  float z = attention::dropoutFactor<float>(
                      g, dropoutStep,
                      attention::probabilityIndex(g, b, h, i, j0 + c));
                  // dS = P (dP - delta), dP = z dP~; dV reads P~ = z P.
                  dr[c] = p * (z * dr[c] - delta[i]);
                  pr[c] = z * p;
                }
              }
              gemm(true, false, cols, Dv, rows, 1.0f, probs, bc, doTile, Dv,
                   1.0f, dvAcc + j0 * Dv, Dv);
              gemm(true, false, cols, D, rows, 1.0f, dScores, bc, qTile, D,
                   1.0f, dkAcc + j0 * D, D);
              gemm(false, false, rows, D, cols, 1.0f, dScores, bc, kTile, D,
                   1.0f, dqAcc + i0 * D, D);
            }
          }
          T *dq = gradQ + bh * Tq * D;
          for (int64_t n = 0; n < Tq * D; ++n)
            dq[n] = T(dqAcc[n] * scale);
        }
        T *dk = gradK + kvh * Tk * D, *dv = gradV + kvh * Tk * Dv;
        for (int64_t n = 0; n < Tk * D; ++n)
          dk[n] = T(dkAcc[n]);
        for (int64_t n = 0; n < Tk * Dv; ++n)
          dv[n] = T(dvAcc[n]);
      }
    }
  });
}

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_ATTENTION_ATTENTIONKERNELS_H
