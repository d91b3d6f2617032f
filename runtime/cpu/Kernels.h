//===- Kernels.h - The CPU backend's kernels --------------------*- C++ -*-===//
//
// What generated CPU code calls for the ops whose family has no folder yet
// (the GEMMs, by OpenBLAS, and the optimizer updates), and what every
// family's kernels share: the error channel, the GEMMs, widening of 16-bit
// storage. An op family's own kernels are its lang/ops/FAMILY/*Kernels.h.
// Shapes are compile-time constants at the call sites; pointers point into
// the planned arena and persistent regions. Everything computes in f32
// (sums of many terms in double where PyTorch would lose precision
// otherwise), and is deterministic for a given thread count.
//
// Part of the runtime: plain C++17 and OpenBLAS, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_CPU_KERNELS_H
#define MNEMO_RUNTIME_CPU_KERNELS_H

#include "lang/ops/elementwise/ElementwiseFormulas.h"
#include "runtime/cpu/Half.h"
#include "runtime/cpu/Parallel.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace mnemo::cpu {

/// The trainer's --profile: a generated step brackets each op with opClock
/// and opTime, which adds the op's seconds to seconds[op] (seconds is null
/// when not profiling). Out of line: a deep model's step has thousands of
/// ops, and an inline timer (a scope guard doing clock arithmetic, with an
/// exception cleanup each) made most of its compile time.
double opClock(const double *seconds);
void opTime(double *seconds, int op, double start);

//===----------------------------------------------------------------------===//
// Scalar functions the kernels share with the fused loops
//===----------------------------------------------------------------------===//

// The elementwise formulas (fastExp and every op's) are
// lang/ops/elementwise/ElementwiseFormulas.h's, which generated loops call
// as mnemo::elementwise::NAME(...).
using elementwise::fastExp;

/// PyTorch's NaN semantics: max and max_pool propagate a NaN (NaN compares
/// false, and std::max would drop it), as relu does.
template <typename T> inline T nanMax(T a, T b) {
  return a > b || a != a ? a : b;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// Row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C.
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
          float beta, float *c, int64_t ldc);

/// Element offsets of each batch's matrices, over a batch index space of up
/// to four dimensions (a strided view's batch dimensions need not be
/// contiguous).
struct BatchLayout {
  int rank;
  int64_t dims[4];
  int64_t a[4], b[4], c[4];

  /// The number of batch entries.
  int64_t count() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= dims[d];
    return n;
  }
  /// Entry `index`'s element offsets into a, b and c.
  void offsets(int64_t index, int64_t &offsetA, int64_t &offsetB,
               int64_t &offsetC) const {
    offsetA = offsetB = offsetC = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t coordinate = index % dims[d];
      index /= dims[d];
      offsetA += coordinate * a[d];
      offsetB += coordinate * b[d];
      offsetC += coordinate * c[d];
    }
  }
};
void batchedGemm(const BatchLayout &batch, bool transA, bool transB, int64_t m,
                 int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c,
                 int64_t ldc);

/// The type of an argument that may be nullptr (a bias: RMS norm's, a
/// classifier's), taken from the other arguments rather than deduced from
/// it.
template <typename T> struct TakenFromOthers { using type = T; };
template <typename T> using NotDeduced = typename TakenFromOthers<T>::type;

/// 16-bit storage widened to f32 and f32 narrowed back, element by element
/// (the operands and results of the f32 kernels that 16-bit ops run on).
template <typename T> inline void narrow(const float *x, int64_t n, T *out) {
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = T(x[i]);
  });
}
template <typename T> inline void widen(const T *x, int64_t n, float *out) {
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = float(x[i]);
  });
}

/// The tiles a GEMM on 16-bit storage works in: `rows` x `cols` of C, by
/// `depth` of the reduction, each f32 copy near kHalfGemmTileFloats at
/// most. Widening whole operands cost GPT-2 small's MLP 130 MiB of
/// workspace at batch 8, more than its weights. The tiles are chosen so
/// that each element is widened once where one operand (or C) fits: op(B)
/// whole and A by rows (a layer's product), op(A) whole and B by columns,
/// or C whole and both by depth (a weight's gradient); otherwise large
/// tiles, so that widening again stays a small fraction of the FLOPs. A
/// product that fits is one sgemm.
constexpr int64_t kHalfGemmTileFloats = int64_t(1) << 21; // 8 MiB
struct HalfGemmTiles {
  int64_t rows = 1, cols = 1, depth = 1;
};
/// `total` in equal pieces of at most `most` (at least 64, or the sgemms get
/// too thin to run well).
inline int64_t evenSplit(int64_t total, int64_t most) {
  total = std::max<int64_t>(1, total);
  most = std::max<int64_t>(64, most);
  int64_t pieces = (total + most - 1) / most;
  return (total + pieces - 1) / pieces;
}
inline HalfGemmTiles halfGemmTiles(int64_t m, int64_t n, int64_t k) {
  const int64_t cap = kHalfGemmTileFloats;
  HalfGemmTiles t;
  if (k * n <= cap) {
    t.depth = std::max<int64_t>(1, k), t.cols = std::max<int64_t>(1, n);
    t.rows = evenSplit(m, cap / std::max(t.cols, t.depth));
  } else if (m * k <= cap) {
    t.depth = std::max<int64_t>(1, k), t.rows = std::max<int64_t>(1, m);
    t.cols = evenSplit(n, cap / std::max(t.rows, t.depth));
  } else if (m * n <= cap) {
    t.rows = std::max<int64_t>(1, m), t.cols = std::max<int64_t>(1, n);
    t.depth = evenSplit(k, cap / std::max(t.rows, t.cols));
  } else {
    // Every operand is re-read: A once per column block, B once per row
    // block, about 1/(2 cols) + 1/(2 rows) widenings a FLOP.
    t.rows = evenSplit(m, 1024), t.cols = evenSplit(n, 2048);
    t.depth = evenSplit(k, 1024);
  }
  t.rows = std::min(t.rows, std::max<int64_t>(1, m));
  t.cols = std::min(t.cols, std::max<int64_t>(1, n));
  t.depth = std::min(t.depth, std::max<int64_t>(1, k));
  return t;
}
/// The workspace gemmHalf needs, in floats.
inline int64_t gemmHalfWorkspaceFloats(int64_t m, int64_t n, int64_t k) {
  HalfGemmTiles t = halfGemmTiles(m, n, k);
  return t.rows * t.depth + t.depth * t.cols + t.rows * t.cols;
}

/// GEMMs on 16-bit storage (mixed precision): op(A) and op(B) widened to
/// f32 in `workspace` a tile at a time (halfGemmTiles), f32 sgemms summing
/// the tiles of the reduction in order into a tile of C in f32, each tile
/// narrowed into C. The workspace holds gemmHalfWorkspaceFloats floats.
template <typename T>
void gemmHalf(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              const T *a, int64_t lda, const T *b, int64_t ldb, T *c,
              int64_t ldc, float *workspace);
template <typename T>
void batchedGemmHalf(const BatchLayout &batch, bool transA, bool transB,
                     int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,
                     const T *b, int64_t ldb, T *c, int64_t ldc,
                     float *workspace);

/// False (with the reason) in a trainer built without OpenBLAS: it has no
/// CPU backend and runs its steps on the GPU only.
bool backendAvailable(std::string &why);

/// A kernel's failure (an index out of range): recorded, and reported by
/// the trainer after the step.
void reportError(const std::string &message);
/// The first error since the last call, or empty.
std::string takeError();

} // namespace mnemo::cpu

#endif // MNEMO_RUNTIME_CPU_KERNELS_H
