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
#include "lang/ops/matmul/MatmulKernels.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace mnemo {
namespace losses {

/// linear_cross_entropy's problem: `rows` hidden states of `dim` features
/// against `classes` weight rows, `chunkRows` rows of logits at a time;
/// `halfOperands` when the hidden states and weight are 16-bit; `bias`
/// when the logits add a bias of `classes`.
struct ClassifierGeometry {
  int64_t rows = 0, dim = 0, classes = 0, chunkRows = 1;
  bool halfOperands = false, bias = false;
};

/// The rows of a chunk (what passes/FuseLinearCrossEntropy.cpp sets): the
/// chunk's logits about as large as the hidden states they come from
/// (Liger-Kernel's rule: rows * dim / classes, rounded up to a power of
/// two), so the fused loss never holds more than about twice its input;
/// at least `minRows` (kMinChunkRows, so that each sgemm call stays
/// efficient; kMinGpuChunkRows for a plan made for a GPU, where cuBLASLt
/// ran GPT-2 small's 128-row chunks on its small-tile kernels; 512 keeps
/// GPT-2 small's bf16 plan on a GPU under 4 GiB, 1024 would not); at most
/// every row.
constexpr int64_t kMinChunkRows = 64;
constexpr int64_t kMinGpuChunkRows = 512;
inline int64_t classifierChunkRows(int64_t rows, int64_t dim, int64_t classes,
                                   int64_t minRows = kMinChunkRows) {
  int64_t target = (rows * dim + classes - 1) / std::max<int64_t>(1, classes);
  int64_t chunk = std::max<int64_t>(1, minRows);
  while (chunk < target)
    chunk *= 2;
  return std::max<int64_t>(1, std::min(chunk, rows));
}

/// The classes a CPU kernel works on at a time. 16-bit operands are
/// widened to f32 for the products a block of weight rows at a time, so
/// the f32 copies of the weight and of its gradient's sum never exceed a
/// block (GPT-2's head widened whole is 147 MiB, and its gradient's f32
/// sum as much again); f32 operands are read where they are, in one block.
constexpr int64_t kHalfClassBlock = 4096;
inline int64_t classifierClassBlock(const ClassifierGeometry &g) {
  return g.halfOperands
             ? std::max<int64_t>(1, std::min(g.classes, kHalfClassBlock))
             : std::max<int64_t>(1, g.classes);
}

/// The forward's running state per row, in floats: the max of the logits
/// seen so far and its class, and in double their exponentials' sum below
/// it, the target's logit and the logits' sum (label smoothing).
constexpr int64_t kRowStateFloats = 8;

/// The CPU kernels' workspace in floats. Forward: each row's running state,
/// a tile of a chunk's rows by a block of classes of logits, and for
/// 16-bit operands a block of the weight and a chunk of hidden rows
/// widened. Backward: a tile of logits (their gradient in place), and for
/// 16-bit operands a block of the weight widened, the f32 sum of its
/// gradient, a chunk of hidden rows widened, and the hidden states'
/// gradient summed over the blocks in f32, and a tile of the logits'
/// gradient rounded to 16 bits (for oneDNN's products, ClassifierProducts,
/// which need no widened copies: their scratchpads use the weight block's
/// room). With a bias and 16-bit operands, both widen a block of it, and
/// the backward sums its gradient in f32 (an f32 bias is read, and its
/// gradient summed, in place).
inline int64_t classifierWorkspaceFloats(const ClassifierGeometry &g,
                                         bool backward) {
  int64_t R = std::min(g.chunkRows, g.rows), B = classifierClassBlock(g),
          D = g.dim, N = g.rows;
  int64_t tile = R * B, bias = g.bias && g.halfOperands ? 2 * B : 0;
  if (!backward)
    return kRowStateFloats * N + tile + (g.halfOperands ? B * D + R * D : 0) +
           bias;
  return tile +
         (g.halfOperands ? 2 * B * D + R * D + N * D + (tile + 1) / 2 : 0) +
         bias;
}

/// linear_cross_entropy_with_grad's workspace in floats. With one block of
/// classes (f32 operands, or few classes) the backward's, after each row's
/// loss term (a double); with several, the forward runs first (a row's
/// log-sum-exp needs every block) into the first part, shared with the
/// backward after it, then the rows' log-sum-exp.
inline int64_t classifierWithGradWorkspaceFloats(const ClassifierGeometry &g) {
  if (classifierClassBlock(g) == g.classes)
    return 2 * g.rows + classifierWorkspaceFloats(g, /*backward=*/true);
  int64_t shared = std::max(classifierWorkspaceFloats(g, false),
                            classifierWorkspaceFloats(g, true));
  return (shared + 1) / 2 * 2 + g.rows;
}

/// The CUDA kernels' scratch, at the bottom of the CUDA workspace, in
/// bytes: a chunk's logits in the operands' type (cuBLASLt writes them, the
/// kernels read them, and the backward turns them into their gradient in
/// place); forward, each row's loss and count, and with accuracy whether
/// its first maximum is its target; forward and backward in one pass, each
/// row's log-sum-exp; backward, the count of rows that take part (`total`)
/// and, for 16-bit operands, the weight gradient's and the bias gradient's
/// f32 sums over the chunks. The GEMMs' own cuBLASLt workspace lies above
/// it (GemmCall::reservedWorkspace), kCudaGemmHeadroom at least.
struct ClassifierCudaScratch {
  int64_t logits = 0, rowLoss = 0, counted = 0, hits = 0, logSumExp = 0,
          total = 0, weightSums = 0, biasSums = 0, held = 0;
};
enum class ClassifierPass : int {
  Forward,
  ForwardWithAccuracy,
  Backward,
  ForwardAndBackward
};
constexpr int64_t kCudaGemmHeadroom = int64_t(4) << 20;
inline int64_t roundUp256(int64_t bytes) { return (bytes + 255) / 256 * 256; }
inline ClassifierCudaScratch classifierCudaScratch(const ClassifierGeometry &g,
                                                   ClassifierPass pass) {
  int64_t elementBytes = g.halfOperands ? 2 : 4;
  ClassifierCudaScratch s;
  int64_t R = std::min(g.chunkRows, g.rows), rowBytes = roundUp256(g.rows * 4);
  int64_t at = roundUp256(R * g.classes * elementBytes);
  if (pass != ClassifierPass::Backward) {
    s.rowLoss = at;
    s.counted = at += rowBytes;
    s.hits = at += rowBytes;
    if (pass == ClassifierPass::ForwardWithAccuracy)
      at += rowBytes;
    if (pass != ClassifierPass::ForwardAndBackward) {
      s.held = at;
      return s;
    }
    s.logSumExp = at;
    at += rowBytes;
  }
  s.total = at;
  at += 256;
  s.weightSums = at;
  if (g.halfOperands)
    at += roundUp256(g.classes * g.dim * 4);
  s.biasSums = at;
  s.held = at + (g.halfOperands && g.bias ? roundUp256(g.classes * 4) : 0);
  return s;
}

/// f32 hidden rows are read where they are; 16-bit ones widened into
/// `to` a chunk at a time.
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

/// log(sum(exp(row))) of a row of `classes`, max-shifted and summed in
/// double; returned in double for the loss (a mean in double), or in f32,
/// the log rounded before the shift is added back (what the gradient
/// kernels exponentiate against).
template <typename Result = float>
inline Result rowLogSumExp(const float *row, int64_t classes) {
  float m = *std::max_element(row, row + classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c)
    sum += fastExp(row[c] - m);
  return Result(std::log(sum)) + m;
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
    total += rowLossTerm(row, classes, t, rowLogSumExp<double>(row, classes),
                         smoothing);
    ++counted;
  }
  *loss = float(total / double(counted));
  return true;
}

/// The logit gradient of `count` classes of a row of `classes`, from class
/// `first` (a block of the fused loss; all of them for cross_entropy),
/// zero where the row is ignored.
inline void rowGradient(const float *row, int32_t target, float logSumExp,
                        float scale, int64_t classes, int64_t ignoreIndex,
                        float smoothing, float *out, int64_t first = 0,
                        int64_t count = -1) {
  if (count < 0)
    count = classes;
  if (!losses::countsTowardLoss(target, ignoreIndex)) {
    std::fill(out, out + count, 0.0f);
    return;
  }
  for (int64_t c = 0; c < count; ++c)
    out[c] = losses::crossEntropyGradValue(row[c], logSumExp,
                                           first + c == target, scale,
                                           float(classes), smoothing);
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

/// A block of `count` classes from `first` of a weight stored [classes,
/// dim] (transposed) or [dim, classes]: f32 weights where they are, with
/// their leading dimension; 16-bit ones widened into `scratch`, packed.
struct WeightBlock {
  const float *data;
  int64_t ld;
};
inline WeightBlock weightBlock(const float *weight, bool transposed,
                               int64_t dim, int64_t classes, int64_t first,
                               int64_t, float *) {
  return transposed ? WeightBlock{weight + first * dim, dim}
                    : WeightBlock{weight + first, classes};
}
template <typename T>
inline WeightBlock weightBlock(const T *weight, bool transposed, int64_t dim,
                               int64_t classes, int64_t first, int64_t count,
                               float *scratch) {
  if (transposed) {
    widen(weight + first * dim, count * dim, scratch);
    return {scratch, dim};
  }
  // Row by row of [dim, classes]: a block of classes is a column block.
  parallelFor(dim, rowGrain(count), [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d)
      widen(weight + d * classes + first, count, scratch + d * count);
  });
  return {scratch, count};
}

/// Where a block of the weight's gradient is summed: in place for f32, in
/// `scratch` (packed) for 16-bit storage, which narrowBlock then writes.
struct GradientBlock {
  float *data;
  int64_t ld;
};
inline GradientBlock gradientBlock(float *weightGrad, bool transposed,
                                   int64_t dim, int64_t classes, int64_t first,
                                   int64_t, float *) {
  return transposed ? GradientBlock{weightGrad + first * dim, dim}
                    : GradientBlock{weightGrad + first, classes};
}
template <typename T>
inline GradientBlock gradientBlock(T *, bool transposed, int64_t dim, int64_t,
                                   int64_t, int64_t count, float *scratch) {
  return {scratch, transposed ? dim : count};
}
inline void narrowBlock(const float *, bool, int64_t, int64_t, int64_t, int64_t,
                        float *) {}
template <typename T>
inline void narrowBlock(const float *block, bool transposed, int64_t dim,
                        int64_t classes, int64_t first, int64_t count,
                        T *weightGrad) {
  if (transposed) {
    narrow(block, count * dim, weightGrad + first * dim);
    return;
  }
  parallelFor(dim, rowGrain(count), [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d)
      narrow(block + d * count, count, weightGrad + d * classes + first);
  });
}

/// A block of `count` of the bias's classes from `first`, in f32: where it
/// is for f32, widened into `scratch` for 16-bit; null without a bias.
inline const float *biasBlock(const float *bias, int64_t first, int64_t,
                              float *) {
  return bias ? bias + first : nullptr;
}
template <typename T>
inline const float *biasBlock(const T *bias, int64_t first, int64_t count,
                              float *scratch) {
  if (!bias)
    return nullptr;
  widen(bias + first, count, scratch);
  return scratch;
}

/// A tile's row of logits plus its block of the bias (none when null).
inline void addBias(float *row, const float *bias, int64_t count) {
  if (bias)
    for (int64_t c = 0; c < count; ++c)
      row[c] += bias[c];
}

/// The 16-bit classifier's matrix products as MatmulSites with f32 results
/// (MatmulKernels.h): oneDNN's bf16 matmul where this CPU computes bf16
/// natively, on the operands as they lie, so that nothing is widened and
/// a product runs at about twice sgemm's speed. The logits' gradient is
/// rounded to 16 bits for the two gradient products, as autocast's bf16
/// logits give it and as the CUDA kernels do. One site per product and
/// shape: a chunk's rows or the last chunk's, by a block's classes or the
/// last block's. The generated code holds one per fused op (a
/// namespace-scope object, prepared with the other 16-bit products); where
/// any site does not run on oneDNN, the kernels widen for sgemm.
class ClassifierProducts {
public:
  enum Product { Logits, HiddenGrad, WeightGrad };

  ClassifierProducts(const losses::ClassifierGeometry &g, bool transposeWeight,
                     MatmulData data) {
    int64_t chunk = std::min(g.chunkRows, g.rows),
            block = losses::classifierClassBlock(g);
    rows = {chunk, g.rows % chunk};
    classes = {block, g.classes % block};
    // Their scratchpads go where the widened weight block would.
    int64_t scratchBytes = 4 * classes[0] * g.dim;
    for (Product p : {Logits, HiddenGrad, WeightGrad})
      for (int64_t r : rows)
        for (int64_t c : classes)
          sites.push_back(r && c ? std::make_unique<MatmulSite>(
                                       shapeOf(p, r, c, g, transposeWeight),
                                       data, scratchBytes)
                                 : nullptr);
  }

  /// Whether every product runs on oneDNN (known once prepared).
  bool native() const {
    return std::all_of(sites.begin(), sites.end(), [](const auto &site) {
      return !site || site->usesOneDnn();
    });
  }

  const MatmulSite &site(Product p, int64_t r, int64_t c) const {
    return *sites[(int(p) * 2 + (r != rows[0])) * 2 + (c != classes[0])];
  }

private:
  /// C = op(A) op(B) of each product, row-major: Logits, tile = h W_b^T
  /// (W_b [classes, dim], or h W_b for [dim, classes]); HiddenGrad,
  /// dh += G W_b (G W_b^T); WeightGrad, dW_b += G^T h (h^T G), with dW_b
  /// packed as the kernels sum it (gradientBlock).
  static MatmulShape shapeOf(Product p, int64_t r, int64_t c,
                             const losses::ClassifierGeometry &g,
                             bool transposed) {
    int64_t D = g.dim, C = g.classes;
    // The parts of the products of a chunk's rows split their columns:
    // each packs its part of the weight block, not all of it.
    switch (p) {
    case Logits:
      return {false, transposed, r,     c,   D, D, transposed ? D : C,
              c,     true,       false, true};
    case HiddenGrad:
      return {false, !transposed, r,    D,   c, c, transposed ? D : C,
              D,     true,        true, true};
    case WeightGrad:
      return transposed
                 ? MatmulShape{true, false, c, D, r, c, D, D, true, true}
                 : MatmulShape{true, false, D, c, r, D, c, c, true, true};
    }
    return {};
  }

  /// A chunk's rows and the last chunk's, a block's classes and the last
  /// block's (0: none).
  std::array<int64_t, 2> rows, classes;
  std::vector<std::unique_ptr<MatmulSite>> sites;
};

namespace detail {
/// The sites to run a classifier's products on: `products` where it
/// exists and runs natively, else null (sgemm on widened operands).
inline const ClassifierProducts *nativeProducts(const ClassifierProducts *p) {
  return p && p->native() ? p : nullptr;
}

/// A tile of logits, rows from r0 by classes from c0, into `tile` in f32:
/// on `native`'s site (16-bit operands as they lie), else one sgemm of
/// the chunk's rows (16-bit ones widened into `hiddenChunk`) and `w`; it
/// returns those rows for the backward's sgemms (null on oneDNN).
template <typename T>
const float *logitsTile(const T *hidden, const T *weight, const WeightBlock &w,
                        bool transposeWeight, int64_t D, int64_t r0,
                        int64_t rows, int64_t c0, int64_t classes,
                        const ClassifierProducts *native, float *hiddenChunk,
                        float *scratch, float *tile) {
  if constexpr (!std::is_same_v<T, float>) {
    if (native) {
      native->site(ClassifierProducts::Logits, rows, classes)
          .runF32(hidden + r0 * D, weight + (transposeWeight ? c0 * D : c0),
                  tile, scratch);
      return nullptr;
    }
  }
  const float *h = losses::widenedRows(hidden + r0 * D, rows * D, hiddenChunk);
  gemm(false, transposeWeight, rows, classes, D, 1.0f, h, D, w.data, w.ld, 0.0f,
       tile, classes);
  return h;
}
} // namespace detail

/// The CPU kernels of linear_cross_entropy and its gradient: the logits,
/// [rows, classes], exist a tile at a time, a chunk of chunkRows rows by a
/// block of classes (classifierClassBlock), each tile one sgemm into the
/// workspace. The forward runs over the class blocks, each over the row
/// chunks, keeping per row a running max and the sum of exponentials below
/// it (an online log-sum-exp, in double), the target's logit and the
/// logits' sum; the row's loss term follows at the end, and the loss sums
/// them in row order. The running max is found by accuracy()'s scan (the
/// first maximum wins; a NaN never does, unless in class 0), so its class
/// gives the accuracy where it is asked for (`accuracy` not null). The backward
/// needs no running state (each logit's gradient takes the row's saved
/// log-sum-exp): per class block and row chunk, the tile becomes its gradient
/// in place, and two more sgemms add it into the chunk's rows of the hidden
/// states' gradient (beta 1 after the first block) and into the block of the
/// weight's (beta 1 after the first chunk): fixed orders, so a step is
/// deterministic. A bias is added to each tile's rows before they are read; its
/// gradient is the tiles' column sums, a chunk's in double, added to the
/// block's f32 sum in chunk order. 16-bit operands are widened a block of the
/// weight or a chunk of hidden rows at a time and the gradients summed in f32
/// and narrowed at the end, so products and sums run in f32 as gemmHalf's do;
/// f32 operands make one block, so every weight row is read once per chunk.
template <typename T>
bool linearCrossEntropy(const T *hidden, const T *weight,
                        const int32_t *targets, const NotDeduced<T> *bias,
                        const losses::ClassifierGeometry &g,
                        bool transposeWeight, int64_t ignoreIndex,
                        double smoothing, float *loss, float *logSumExp,
                        float *accuracy, const ClassifierProducts *products,
                        float *workspace) {
  const int64_t N = g.rows, C = g.classes, D = g.dim, R = g.chunkRows,
                B = losses::classifierClassBlock(g);
  const ClassifierProducts *native = detail::nativeProducts(products);
  if (!validTargets(targets, N, C, ignoreIndex))
    return false;
  // Each row's state first (doubles, 8-byte aligned in the workspace).
  struct RowState {
    double sum, target, logitSum;
    float max;
    int32_t maxClass;
  };
  static_assert(sizeof(RowState) == 4 * losses::kRowStateFloats);
  RowState *state = reinterpret_cast<RowState *>(workspace);
  for (int64_t r = 0; r < N; ++r)
    state[r] = {0.0, 0.0, 0.0, -INFINITY, 0};
  float *tile = workspace + losses::kRowStateFloats * N;
  float *weightScratch = tile + R * B, *hiddenChunk = weightScratch + B * D,
        *biasScratch = hiddenChunk + R * D;
  for (int64_t c0 = 0; c0 < C; c0 += B) {
    int64_t classes = std::min(B, C - c0);
    WeightBlock w = native ? WeightBlock{nullptr, 0}
                           : weightBlock(weight, transposeWeight, D, C, c0,
                                         classes, weightScratch);
    const float *b = biasBlock(bias, c0, classes, biasScratch);
    for (int64_t r0 = 0; r0 < N; r0 += R) {
      int64_t rows = std::min(R, N - r0);
      detail::logitsTile(hidden, weight, w, transposeWeight, D, r0, rows, c0,
                         classes, native, hiddenChunk, weightScratch, tile);
      parallelFor(rows, rowGrain(classes), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          float *logits = tile + r * classes;
          addBias(logits, b, classes);
          RowState &row = state[r0 + r];
          // accuracy()'s scan, continued from the blocks before.
          float m = c0 == 0 ? logits[0] : row.max;
          int32_t maxClass = row.maxClass;
          for (int64_t c = c0 == 0 ? 1 : 0; c < classes; ++c)
            if (logits[c] > m) {
              m = logits[c];
              maxClass = int32_t(c0 + c);
            }
          // Rescale the sum below the old max (none on the first block:
          // -inf - -inf would be NaN).
          if (row.sum != 0)
            row.sum *= std::exp(double(row.max) - double(m));
          row.max = m;
          row.maxClass = maxClass;
          double sum = 0;
          for (int64_t c = 0; c < classes; ++c)
            sum += fastExp(logits[c] - m);
          row.sum += sum;
          int32_t t = targets[r0 + r];
          if (t >= c0 && t < c0 + classes)
            row.target = double(logits[t - c0]);
          if (smoothing != 0) {
            double logitSum = 0;
            for (int64_t c = 0; c < classes; ++c)
              logitSum += logits[c];
            row.logitSum += logitSum;
          }
        }
      });
    }
  }
  double total = 0;
  for (int64_t r = 0; r < N; ++r) {
    double lse = std::log(state[r].sum) + state[r].max;
    logSumExp[r] = float(lse);
    if (losses::countsTowardLoss(targets[r], ignoreIndex))
      total += losses::crossEntropyTerm(lse, state[r].target, state[r].logitSum,
                                        double(C), smoothing);
  }
  int64_t counted = countedRows(targets, N, ignoreIndex);
  *loss = float(total / double(counted));
  if (accuracy) {
    int64_t correct = 0;
    for (int64_t r = 0; r < N; ++r)
      correct += losses::countsTowardLoss(targets[r], ignoreIndex) &&
                 state[r].maxClass == targets[r];
    *accuracy = float(double(correct) / double(counted));
  }
  return true;
}

/// A row's log-sum-exp and loss term from all of its logits, computed as
/// linearCrossEntropy computes them from one block (the same scan, sums
/// and order), so that the one-pass kernel's loss and gradient are the
/// forward's and backward's to the bit.
inline double rowLogSumExpAndTerm(const float *logits, int64_t classes,
                                  int32_t target, int64_t ignoreIndex,
                                  double smoothing, double &term) {
  float m = logits[0];
  for (int64_t c = 1; c < classes; ++c)
    if (logits[c] > m)
      m = logits[c];
  double sum = 0, logitSum = 0;
  for (int64_t c = 0; c < classes; ++c)
    sum += fastExp(logits[c] - m);
  if (smoothing != 0)
    for (int64_t c = 0; c < classes; ++c)
      logitSum += logits[c];
  double lse = std::log(sum) + double(m);
  double targetLogit =
      target >= 0 && target < classes ? double(logits[target]) : 0.0;
  term = losses::countsTowardLoss(target, ignoreIndex)
             ? losses::crossEntropyTerm(lse, targetLogit, logitSum,
                                        double(classes), smoothing)
             : 0.0;
  return lse;
}

namespace detail {
/// linearCrossEntropyGrad's work. With `rowTerms` (one block of classes),
/// each row's log-sum-exp is computed from its tile, and its loss term
/// stored, before the tile becomes its gradient: the one pass of
/// linearCrossEntropyWithGrad. Without, the saved `logSumExp` is read.
template <typename T>
void classifierBackward(const float *grad, const T *hidden, const T *weight,
                        const int32_t *targets, const float *logSumExp,
                        const NotDeduced<T> *bias,
                        const losses::ClassifierGeometry &g,
                        bool transposeWeight, int64_t ignoreIndex,
                        double smoothing, T *hiddenGrad, T *weightGrad,
                        NotDeduced<T> *biasGrad, double *rowTerms,
                        const ClassifierProducts *products, float *workspace) {
  const int64_t N = g.rows, C = g.classes, D = g.dim, R = g.chunkRows,
                B = losses::classifierClassBlock(g);
  const ClassifierProducts *native = nativeProducts(products);
  const float scale = grad[0] / float(countedRows(targets, N, ignoreIndex));
  float *tile = workspace;
  // 16-bit operands: a block of the weight widened and its gradient's f32
  // sum, a chunk of hidden rows widened, the hidden states' gradient in f32,
  // a tile of the logits' gradient in T, a block of the bias widened and
  // its gradient's f32 sum.
  // On oneDNN, the tile's gradient rounded to T for the two products.
  float *w32 = tile + R * B, *dw32 = w32 + B * D, *h32 = dw32 + B * D,
        *dh32 = h32 + R * D, *b32 = dh32 + N * D + (R * B + 1) / 2,
        *db32 = b32 + B;
  T *g16 = native ? reinterpret_cast<T *>(dh32 + N * D) : nullptr;
  float *dhAll = losses::f32Storage(hiddenGrad, dh32);
  // oneDNN's products add into their f32 sums, which start at zero.
  if (native)
    std::fill(dhAll, dhAll + N * D, 0.0f);
  for (int64_t c0 = 0; c0 < C; c0 += B) {
    int64_t classes = std::min(B, C - c0);
    WeightBlock w =
        native ? WeightBlock{nullptr, 0}
               : weightBlock(weight, transposeWeight, D, C, c0, classes, w32);
    GradientBlock dw =
        gradientBlock(weightGrad, transposeWeight, D, C, c0, classes, dw32);
    if (native)
      std::fill(dw.data, dw.data + classes * D, 0.0f);
    const float *b = biasBlock(bias, c0, classes, b32);
    float *db = biasGrad ? losses::f32Storage(biasGrad + c0, db32) : nullptr;
    for (int64_t r0 = 0; r0 < N; r0 += R) {
      int64_t rows = std::min(R, N - r0);
      const float *h = logitsTile(hidden, weight, w, transposeWeight, D, r0,
                                  rows, c0, classes, native, h32, w32, tile);
      float *dh = dhAll + r0 * D;
      parallelFor(rows, rowGrain(classes), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          float *logits = tile + r * classes;
          addBias(logits, b, classes);
          int32_t t = targets[r0 + r];
          float lse =
              rowTerms
                  ? float(rowLogSumExpAndTerm(logits, classes, t, ignoreIndex,
                                              smoothing, rowTerms[r0 + r]))
                  : logSumExp[r0 + r];
          rowGradient(logits, t, lse, scale, C, ignoreIndex, float(smoothing),
                      logits, c0, classes);
          if constexpr (!std::is_same_v<T, float>)
            if (g16)
              narrow(logits, classes, g16 + r * classes);
        }
      });
      if (db)
        parallelFor(classes, rowGrain(rows), [&](int64_t begin, int64_t end) {
          for (int64_t c = begin; c < end; ++c) {
            double sum = 0;
            for (int64_t r = 0; r < rows; ++r)
              sum += tile[r * classes + c];
            db[c] = float((r0 == 0 ? 0.0 : double(db[c])) + sum);
          }
        });
      if constexpr (!std::is_same_v<T, float>) {
        if (native) {
          const T *hRows = hidden + r0 * D,
                  *wBlock = weight + (transposeWeight ? c0 * D : c0);
          native->site(ClassifierProducts::HiddenGrad, rows, classes)
              .runF32(g16, wBlock, dh, w32);
          native->site(ClassifierProducts::WeightGrad, rows, classes)
              .runF32(transposeWeight ? g16 : hRows,
                      transposeWeight ? hRows : g16, dw.data, w32);
          continue;
        }
      }
      float dhBeta = c0 == 0 ? 0.0f : 1.0f, dwBeta = r0 == 0 ? 0.0f : 1.0f;
      if (transposeWeight) {
        // weight [C, D]: dh += G W_b, dW_b += G^T h.
        gemm(false, false, rows, D, classes, 1.0f, tile, classes, w.data, w.ld,
             dhBeta, dh, D);
        gemm(true, false, classes, D, rows, 1.0f, tile, classes, h, D, dwBeta,
             dw.data, dw.ld);
      } else {
        // weight [D, C]: dh += G W_b^T, dW_b += h^T G.
        gemm(false, true, rows, D, classes, 1.0f, tile, classes, w.data, w.ld,
             dhBeta, dh, D);
        gemm(true, false, D, classes, rows, 1.0f, h, D, tile, classes, dwBeta,
             dw.data, dw.ld);
      }
    }
    narrowBlock(dw.data, transposeWeight, D, C, c0, classes, weightGrad);
    if (db)
      losses::narrowInto(db, classes, biasGrad + c0);
  }
  losses::narrowInto(dhAll, N * D, hiddenGrad);
}
} // namespace detail

template <typename T>
bool linearCrossEntropyGrad(const float *grad, const T *hidden, const T *weight,
                            const int32_t *targets, const float *logSumExp,
                            const NotDeduced<T> *bias,
                            const losses::ClassifierGeometry &g,
                            bool transposeWeight, int64_t ignoreIndex,
                            double smoothing, T *hiddenGrad, T *weightGrad,
                            NotDeduced<T> *biasGrad,
                            const ClassifierProducts *products,
                            float *workspace) {
  if (!validTargets(targets, g.rows, g.classes, ignoreIndex))
    return false;
  detail::classifierBackward(grad, hidden, weight, targets, logSumExp, bias, g,
                             transposeWeight, ignoreIndex, smoothing,
                             hiddenGrad, weightGrad, biasGrad, nullptr,
                             products, workspace);
  return true;
}

/// linear_cross_entropy_with_grad: the loss and the gradients of
/// linearCrossEntropy and linearCrossEntropyGrad, equal to theirs to the
/// bit. With one block of classes (f32 operands), one pass: each chunk's
/// tile of logits gives its rows' loss terms and log-sum-exp, then becomes
/// its gradient, so the head's product runs once where the two kernels run
/// it twice. With several (16-bit operands and more classes than a block),
/// a row's log-sum-exp needs every block before any gradient: the two
/// kernels run one after the other.
template <typename T>
bool linearCrossEntropyWithGrad(
    const float *grad, const T *hidden, const T *weight, const int32_t *targets,
    const NotDeduced<T> *bias, const losses::ClassifierGeometry &g,
    bool transposeWeight, int64_t ignoreIndex, double smoothing, float *loss,
    T *hiddenGrad, T *weightGrad, NotDeduced<T> *biasGrad,
    const ClassifierProducts *products, float *workspace) {
  const int64_t N = g.rows;
  if (losses::classifierClassBlock(g) != g.classes) {
    float *logSumExp =
        workspace + losses::classifierWithGradWorkspaceFloats(g) - N;
    return linearCrossEntropy(hidden, weight, targets, bias, g, transposeWeight,
                              ignoreIndex, smoothing, loss, logSumExp, nullptr,
                              products, workspace) &&
           linearCrossEntropyGrad(grad, hidden, weight, targets, logSumExp,
                                  bias, g, transposeWeight, ignoreIndex,
                                  smoothing, hiddenGrad, weightGrad, biasGrad,
                                  products, workspace);
  }
  if (!validTargets(targets, N, g.classes, ignoreIndex))
    return false;
  double *rowTerms = reinterpret_cast<double *>(workspace);
  detail::classifierBackward(grad, hidden, weight, targets, nullptr, bias, g,
                             transposeWeight, ignoreIndex, smoothing,
                             hiddenGrad, weightGrad, biasGrad, rowTerms,
                             products, workspace + 2 * N);
  // The forward's sum: the counted rows' terms in row order, in double.
  double total = 0;
  for (int64_t r = 0; r < N; ++r)
    if (losses::countsTowardLoss(targets[r], ignoreIndex))
      total += rowTerms[r];
  *loss = float(total / double(countedRows(targets, N, ignoreIndex)));
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
