//===- LossesKernels.h - Classification losses on the CPU -------*- C++ -*-===//
//
// The CPU kernels generated code calls for cross_entropy, its gradient,
// the fused linear_cross_entropy and its gradient, and accuracy (the
// emission model, LossesEmission.cpp, includes this header where a model
// uses them), and the fused op's chunk and workspace sizes (which the plan
// reads through LossesOps.cpp). A row's log-sum-exp sums in double; the
// terms are LossesFormulas.h's. A target outside the classes that is not
// ignore_index is reported through the kernels' error channel
// (runtime/cpu/Kernels.h's reportError). Part of the runtime side of the
// family: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_H
#define MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_H

#include "lang/ops/losses/LossesFormulas.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace mnemo {
namespace losses {

/// linear_cross_entropy's problem: `rows` hidden states of `dim` features
/// against `classes` weight rows, `chunkRows` rows of logits at a time;
/// `halfOperands` when the hidden states and weight are 16-bit.
struct ClassifierGeometry {
  int64_t rows = 0, dim = 0, classes = 0, chunkRows = 1;
  bool halfOperands = false;
};

/// The rows of a chunk (what passes/FuseLinearCrossEntropy.cpp sets): the
/// chunk's logits about as large as the hidden states they come from
/// (Liger-Kernel's rule: rows * dim / classes, rounded up to a power of
/// two), so the fused loss never holds more than about twice its input;
/// at least kMinChunkRows rows, so each sgemm or cuBLASLt call stays
/// efficient; at most every row.
constexpr int64_t kMinChunkRows = 64;
inline int64_t classifierChunkRows(int64_t rows, int64_t dim, int64_t classes) {
  int64_t target = (rows * dim + classes - 1) / std::max<int64_t>(1, classes);
  int64_t chunk = kMinChunkRows;
  while (chunk < target)
    chunk *= 2;
  return std::max<int64_t>(1, std::min(chunk, rows));
}

/// The CPU kernels' workspace in floats. Forward: the rows' loss terms (2
/// floats each: a double), a chunk's logits, and for 16-bit operands the
/// weight and a chunk of hidden rows widened. Backward: a chunk's logits
/// (their gradient in place), and for 16-bit operands the weight widened,
/// its gradient's f32 sum, and a chunk of hidden rows and their gradient.
inline int64_t classifierWorkspaceFloats(const ClassifierGeometry &g,
                                         bool backward) {
  int64_t R = std::min(g.chunkRows, g.rows), C = g.classes, D = g.dim;
  int64_t logits = R * C;
  if (!backward)
    return 2 * R + logits + (g.halfOperands ? C * D + R * D : 0);
  return logits + (g.halfOperands ? 2 * C * D + 2 * R * D : 0);
}

/// The CUDA kernels' scratch, at the bottom of the CUDA workspace, in
/// bytes: a chunk's logits in the operands' type (cuBLASLt writes them, the
/// kernels read them, and the backward turns them into their gradient in
/// place); forward, each row's loss and count; backward, the count of rows
/// that take part and, for 16-bit operands, the weight gradient's f32 sum
/// over the chunks. The GEMMs' own cuBLASLt workspace lies above it
/// (GemmCall::reservedWorkspace), kCudaGemmHeadroom at least.
struct ClassifierCudaScratch {
  int64_t logits = 0, rowLoss = 0, counted = 0, weightSums = 0, held = 0;
};
constexpr int64_t kCudaGemmHeadroom = int64_t(4) << 20;
inline int64_t roundUp256(int64_t bytes) { return (bytes + 255) / 256 * 256; }
inline ClassifierCudaScratch classifierCudaScratch(const ClassifierGeometry &g,
                                                   bool backward) {
  int64_t elementBytes = g.halfOperands ? 2 : 4;
  ClassifierCudaScratch s;
  int64_t R = std::min(g.chunkRows, g.rows);
  int64_t at = roundUp256(R * g.classes * elementBytes);
  if (!backward) {
    s.rowLoss = at;
    s.counted = at += roundUp256(g.rows * 4);
    s.held = at + roundUp256(g.rows * 4);
    return s;
  }
  s.counted = at;
  at += 256;
  s.weightSums = at;
  s.held = at + (g.halfOperands ? roundUp256(g.classes * g.dim * 4) : 0);
  return s;
}

/// f32 operands are read where they are; 16-bit ones widened into `to`
/// (once for the weight, per chunk for hidden rows).
inline const float *widenedOnce(const float *x, int64_t, float *) { return x; }
template <typename T>
inline const float *widenedOnce(const T *x, int64_t n, float *to) {
  cpu::widen(x, n, to);
  return to;
}
inline const float *widenedRows(const float *x, int64_t, float *) { return x; }
template <typename T>
inline const float *widenedRows(const T *x, int64_t n, float *to) {
  cpu::widen(x, n, to);
  return to;
}
/// Where an f32 result is computed: in place for f32, in `scratch` for
/// 16-bit storage (narrowInto then writes it).
inline float *f32Storage(float *x, float *) { return x; }
template <typename T> inline float *f32Storage(T *, float *scratch) {
  return scratch;
}
inline void narrowInto(const float *, int64_t, float *) {}
template <typename T>
inline void narrowInto(const float *x, int64_t n, T *out) {
  cpu::narrow(x, n, out);
}

} // namespace losses

namespace cpu {

/// log(sum(exp(row))) of a row of `classes`, max-shifted, summed and
/// returned in double (the loss is a mean in double).
inline double rowLogSumExpDouble(const float *row, int64_t classes) {
  float m = *std::max_element(row, row + classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c)
    sum += fastExp(row[c] - m);
  return std::log(sum) + m;
}

/// The same in f32, the log rounded before the shift is added back (what
/// the gradient kernels exponentiate against).
inline float rowLogSumExp(const float *row, int64_t classes) {
  float m = *std::max_element(row, row + classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c)
    sum += fastExp(row[c] - m);
  return float(std::log(sum)) + m;
}

/// Whether `t` is a class or ignore_index; reports it if neither.
inline bool validTarget(int32_t t, int64_t classes, int64_t ignoreIndex) {
  if (!losses::countsTowardLoss(t, ignoreIndex) || (t >= 0 && t < classes))
    return true;
  reportError("target " + std::to_string(t) + " is out of range for " +
              std::to_string(classes) + " classes (and is not ignore_index, " +
              std::to_string(ignoreIndex) + ")");
  return false;
}

/// Whether every target is a class or ignore_index (the first that is
/// neither is reported).
inline bool validTargets(const int32_t *targets, int64_t rows, int64_t classes,
                         int64_t ignoreIndex) {
  for (int64_t r = 0; r < rows; ++r)
    if (!validTarget(targets[r], classes, ignoreIndex))
      return false;
  return true;
}

/// A row's term of the loss (LossesFormulas.h), its sums in double.
inline double rowLossTerm(const float *row, int64_t classes, int32_t target,
                          double logSumExp, double smoothing) {
  double sum = 0;
  if (smoothing != 0)
    for (int64_t c = 0; c < classes; ++c)
      sum += row[c];
  return losses::crossEntropyTerm(logSumExp, double(row[target]), sum,
                                  double(classes), smoothing);
}

/// The rows whose target is not ignore_index.
inline int64_t countedRows(const int32_t *targets, int64_t rows,
                           int64_t ignoreIndex) {
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r)
    counted += losses::countsTowardLoss(targets[r], ignoreIndex);
  return counted;
}

/// Mean cross-entropy over the rows that take part (NaN if none, as
/// PyTorch's 0 / 0); false if a target is out of range.
inline bool crossEntropy(const float *logits, const int32_t *targets,
                         int64_t rows, int64_t classes, int64_t ignoreIndex,
                         double smoothing, float *loss) {
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int32_t t = targets[r];
    if (!validTarget(t, classes, ignoreIndex))
      return false;
    if (!losses::countsTowardLoss(t, ignoreIndex))
      continue;
    const float *row = logits + r * classes;
    total += rowLossTerm(row, classes, t, rowLogSumExpDouble(row, classes),
                         smoothing);
    ++counted;
  }
  *loss = float(total / double(counted));
  return true;
}

/// One row's logit gradient, zero where the row is ignored.
inline void rowGradient(const float *row, int32_t target, float logSumExp,
                        float scale, int64_t classes, int64_t ignoreIndex,
                        float smoothing, float *out) {
  if (!losses::countsTowardLoss(target, ignoreIndex)) {
    std::fill(out, out + classes, 0.0f);
    return;
  }
  for (int64_t c = 0; c < classes; ++c)
    out[c] = losses::crossEntropyGradValue(row[c], logSumExp, c == target,
                                           scale, float(classes), smoothing);
}

/// The logits' gradient; false if a target is out of range.
inline bool crossEntropyGrad(const float *grad, const float *logits,
                             const int32_t *targets, int64_t rows,
                             int64_t classes, int64_t ignoreIndex,
                             double smoothing, float *dlogits) {
  if (!validTargets(targets, rows, classes, ignoreIndex))
    return false;
  float scale = grad[0] / float(countedRows(targets, rows, ignoreIndex));
  parallelFor(rows, rowGrain(classes), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *row = logits + r * classes;
      rowGradient(row, targets[r], rowLogSumExp(row, classes), scale, classes,
                  ignoreIndex, float(smoothing), dlogits + r * classes);
    }
  });
  return true;
}

/// The fraction of counted rows whose first maximum is the target.
inline void accuracy(const float *logits, const int32_t *targets, int64_t rows,
                     int64_t classes, int64_t ignoreIndex, float *out) {
  int64_t correct = 0, counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!losses::countsTowardLoss(targets[r], ignoreIndex))
      continue;
    const float *row = logits + r * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best])
        best = c;
    correct += best == targets[r];
    ++counted;
  }
  *out = float(double(correct) / double(counted));
}

//===----------------------------------------------------------------------===//
// linear_cross_entropy: the classifier's product and the loss in chunks
//===----------------------------------------------------------------------===//

/// The CPU kernels of linear_cross_entropy and its gradient. A chunk of
/// chunkRows rows at a time: its logits [chunkRows, classes] by one sgemm
/// into the workspace, each row's log-sum-exp and loss (forward), or the
/// logits turned into their gradient in place and two more sgemms, into
/// the chunk's rows of the hidden states' gradient and into the weight's
/// (beta 1 after the first chunk: the chunks' sum in a fixed order).
/// 16-bit operands are widened once into the workspace (the weight) or per
/// chunk (the hidden rows), and the gradients narrowed at the end, so the
/// products and sums run in f32 as gemmHalf's do.
template <typename T>
bool linearCrossEntropy(const T *hidden, const T *weight,
                        const int32_t *targets,
                        const losses::ClassifierGeometry &g,
                        bool transposeWeight, int64_t ignoreIndex,
                        double smoothing, float *loss, float *logSumExp,
                        float *workspace) {
  const int64_t N = g.rows, C = g.classes, D = g.dim, R = g.chunkRows;
  if (!validTargets(targets, N, C, ignoreIndex))
    return false;
  // The rows' loss terms first (doubles, 8-byte aligned in the workspace).
  double *terms = reinterpret_cast<double *>(workspace);
  float *logits = workspace + 2 * R;
  const float *w = losses::widenedOnce(weight, C * D, logits + R * C);
  float *hiddenChunk = logits + R * C + (g.halfOperands ? C * D : 0);
  double total = 0;
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    int64_t rows = std::min(R, N - r0);
    const float *h =
        losses::widenedRows(hidden + r0 * D, rows * D, hiddenChunk);
    gemm(false, transposeWeight, rows, C, D, 1.0f, h, D, w,
         transposeWeight ? D : C, 0.0f, logits, C);
    parallelFor(rows, rowGrain(C), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float *row = logits + r * C;
        int32_t t = targets[r0 + r];
        double lse = rowLogSumExpDouble(row, C);
        logSumExp[r0 + r] = float(lse);
        terms[r] = losses::countsTowardLoss(t, ignoreIndex)
                       ? rowLossTerm(row, C, t, lse, smoothing)
                       : 0.0;
      }
    });
    for (int64_t r = 0; r < rows; ++r)
      total += terms[r];
  }
  *loss = float(total / double(countedRows(targets, N, ignoreIndex)));
  return true;
}

template <typename T>
bool linearCrossEntropyGrad(const float *grad, const T *hidden, const T *weight,
                            const int32_t *targets, const float *logSumExp,
                            const losses::ClassifierGeometry &g,
                            bool transposeWeight, int64_t ignoreIndex,
                            double smoothing, T *hiddenGrad, T *weightGrad,
                            float *workspace) {
  const int64_t N = g.rows, C = g.classes, D = g.dim, R = g.chunkRows;
  if (!validTargets(targets, N, C, ignoreIndex))
    return false;
  const float scale = grad[0] / float(countedRows(targets, N, ignoreIndex));
  float *logits = workspace;
  // 16-bit operands: the weight widened, its gradient summed in f32, and a
  // chunk's hidden rows and their gradient in f32.
  float *w32 = logits + R * C, *dw32 = w32 + C * D, *h32 = dw32 + C * D,
        *dh32 = h32 + R * D;
  const float *w = losses::widenedOnce(weight, C * D, w32);
  float *dw = losses::f32Storage(weightGrad, dw32);
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    int64_t rows = std::min(R, N - r0);
    const float *h = losses::widenedRows(hidden + r0 * D, rows * D, h32);
    float *dh = losses::f32Storage(hiddenGrad + r0 * D, dh32);
    gemm(false, transposeWeight, rows, C, D, 1.0f, h, D, w,
         transposeWeight ? D : C, 0.0f, logits, C);
    parallelFor(rows, rowGrain(C), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        rowGradient(logits + r * C, targets[r0 + r], logSumExp[r0 + r], scale,
                    C, ignoreIndex, float(smoothing), logits + r * C);
    });
    float beta = r0 == 0 ? 0.0f : 1.0f;
    if (transposeWeight) {
      // weight [C, D]: dh = G W, dW += G^T h.
      gemm(false, false, rows, D, C, 1.0f, logits, C, w, D, 0.0f, dh, D);
      gemm(true, false, C, D, rows, 1.0f, logits, C, h, D, beta, dw, D);
    } else {
      // weight [D, C]: dh = G W^T, dW += h^T G.
      gemm(false, true, rows, D, C, 1.0f, logits, C, w, C, 0.0f, dh, D);
      gemm(true, false, D, C, rows, 1.0f, h, D, logits, C, beta, dw, C);
    }
    losses::narrowInto(dh, rows * D, hiddenGrad + r0 * D);
  }
  losses::narrowInto(dw, C * D, weightGrad);
  return true;
}

/// mean((a - b)^2), the differences in f32 (as PyTorch's), their squares
/// summed in double.
inline void mse(const float *a, const float *b, int64_t n, float *out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += double(a[i] - b[i]) * double(a[i] - b[i]);
  *out = float(sum / double(n));
}

} // namespace cpu
} // namespace mnemo

#endif // MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_H
