//===- Kernels.cpp - The CPU backend's kernels ----------------------------===//

#include "runtime/cpu/Kernels.h"

// MNEMO_HAVE_BLAS is 0 in a trainer built where OpenBLAS is not (a GPU
// machine with the CUDA toolkit alone): it runs its steps on the GPU, and
// the trainer refuses --device cpu before any step (cpu::backendAvailable).
#ifndef MNEMO_HAVE_BLAS
#define MNEMO_HAVE_BLAS 1
#endif
#if MNEMO_HAVE_BLAS
#include <cblas.h>
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

namespace mnemo::cpu {

namespace {
std::mutex errorMutex;
std::string firstError;
} // namespace

double opClock(const double *seconds) {
  if (!seconds)
    return 0;
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void opTime(double *seconds, int op, double start) {
  if (seconds)
    seconds[op] += opClock(seconds) - start;
}

bool backendAvailable(std::string &why) {
  if (MNEMO_HAVE_BLAS)
    return true;
  why = "this trainer was built without OpenBLAS (none was found when it "
        "was built: install libopenblas-dev, or give CMake "
        "-DMNEMO_DEPS_DIR with its Debian packages unpacked), so it has no "
        "CPU backend";
  return false;
}

void reportError(const std::string &message) {
  std::lock_guard<std::mutex> lock(errorMutex);
  if (firstError.empty())
    firstError = message;
}

std::string takeError() {
  std::lock_guard<std::mutex> lock(errorMutex);
  std::string e;
  std::swap(e, firstError);
  return e;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
          float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  auto call = [&](int64_t rows, int64_t cols, const float *a, const float *b,
                  float *c) {
#if MNEMO_HAVE_BLAS
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, int(rows), int(cols),
                int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
#else
    (void)rows, (void)cols, (void)a, (void)b, (void)c;
    reportError("internal error: a CPU GEMM in a trainer built without "
                "OpenBLAS");
#endif
  };
  // Split C into blocks of rows or of columns over the threads; each block
  // is one single-threaded OpenBLAS call. Every block packs the whole of the
  // other operand, so split the larger dimension: a short, wide C (a
  // convolution's [out channels, pixels]) by columns. Blocks are multiples
  // of 16 so the kernels' panels stay whole.
  int64_t work = m * n * k;
  int64_t parts =
      std::min<int64_t>(threads(), std::max<int64_t>(1, work / (1 << 18)));
  bool byRows = m >= n;
  int64_t length = byRows ? m : n;
  int64_t blocks = (length + 15) / 16;
  parts = std::min(parts, blocks);
  if (parts <= 1) {
    call(m, n, a, b, c);
    return;
  }
  parallelFor(parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t first = blocks * p / parts * 16;
      int64_t last = std::min(length, blocks * (p + 1) / parts * 16);
      if (first >= last)
        continue;
      if (byRows)
        call(last - first, n, a + (transA ? first : first * lda), b,
             c + first * ldc);
      else
        call(m, last - first, a, b + (transB ? first * ldb : first), c + first);
    }
  });
}

void batchedGemm(const BatchLayout &batch, bool transA, bool transB, int64_t m,
                 int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c,
                 int64_t ldc) {
  int64_t count = batch.count();
  // Small matrices (attention heads): one single-threaded GEMM per batch
  // entry, the entries spread over the threads. OpenBLAS runs small GEMMs
  // on the calling thread.
  parallelFor(count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      int64_t offA, offB, offC;
      batch.offsets(index, offA, offB, offC);
      gemm(transA, transB, m, n, k, alpha, a + offA, lda, b + offB, ldb, beta,
           c + offC, ldc);
    }
  });
}

} // namespace mnemo::cpu

//===----------------------------------------------------------------------===//
// 16-bit storage (mixed precision): widen, compute in f32, narrow
//===----------------------------------------------------------------------===//

namespace mnemo::cpu {

namespace {
/// op(X) of a rows x cols result, read through its leading dimension,
/// widened into a dense row-major f32 matrix.
template <typename T>
void widenMatrix(bool transposed, int64_t rows, int64_t cols, const T *x,
                 int64_t ld, float *out) {
  parallelFor(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, cols)),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r)
                  for (int64_t c = 0; c < cols; ++c)
                    out[r * cols + c] =
                        float(transposed ? x[c * ld + r] : x[r * ld + c]);
              });
}
} // namespace

template <typename T>
void gemmHalf(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              const T *a, int64_t lda, const T *b, int64_t ldb, T *c,
              int64_t ldc, float *workspace) {
  if (k == 0) { // an empty sum: zeros, as sgemm with beta 0 gives
    for (int64_t r = 0; r < m; ++r)
      std::fill(c + r * ldc, c + r * ldc + n, T(0.0f));
    return;
  }
  HalfGemmTiles tiles = halfGemmTiles(m, n, k);
  float *a32 = workspace, *b32 = a32 + tiles.rows * tiles.depth,
        *c32 = b32 + tiles.depth * tiles.cols;
  // op(A)'s block at (m0, k0) and op(B)'s at (k0, n0), widened and packed.
  auto widenA = [&](int64_t m0, int64_t k0, int64_t rows, int64_t depth) {
    widenMatrix(transA, rows, depth,
                transA ? a + k0 * lda + m0 : a + m0 * lda + k0, lda, a32);
  };
  auto widenB = [&](int64_t k0, int64_t n0, int64_t depth, int64_t cols) {
    widenMatrix(transB, depth, cols,
                transB ? b + n0 * ldb + k0 : b + k0 * ldb + n0, ldb, b32);
  };
  // An operand that is one tile is widened once.
  bool wholeA = tiles.rows >= m && tiles.depth >= k;
  bool wholeB = tiles.cols >= n && tiles.depth >= k;
  if (wholeA)
    widenA(0, 0, m, k);
  if (wholeB)
    widenB(0, 0, k, n);
  for (int64_t n0 = 0; n0 < n; n0 += tiles.cols) {
    int64_t cols = std::min(tiles.cols, n - n0);
    for (int64_t m0 = 0; m0 < m; m0 += tiles.rows) {
      int64_t rows = std::min(tiles.rows, m - m0);
      for (int64_t k0 = 0; k0 < k; k0 += tiles.depth) {
        int64_t depth = std::min(tiles.depth, k - k0);
        if (!wholeA)
          widenA(m0, k0, rows, depth);
        if (!wholeB)
          widenB(k0, n0, depth, cols);
        gemm(false, false, rows, cols, depth, 1.0f, a32, depth, b32, cols,
             k0 == 0 ? 0.0f : 1.0f, c32, cols);
      }
      parallelFor(rows,
                  std::max<int64_t>(1, kGrain / std::max<int64_t>(1, cols)),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t r = begin; r < end; ++r)
                      for (int64_t j = 0; j < cols; ++j)
                        c[(m0 + r) * ldc + n0 + j] = T(c32[r * cols + j]);
                  });
    }
  }
}

template <typename T>
void batchedGemmHalf(const BatchLayout &batch, bool transA, bool transB,
                     int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,
                     const T *b, int64_t ldb, T *c, int64_t ldc,
                     float *workspace) {
  for (int64_t i = 0; i < batch.count(); ++i) {
    int64_t offsetA, offsetB, offsetC;
    batch.offsets(i, offsetA, offsetB, offsetC);
    gemmHalf(transA, transB, m, n, k, a + offsetA, lda, b + offsetB, ldb,
             c + offsetC, ldc, workspace);
  }
}

#define MNEMO_INSTANTIATE_HALF(T)                                              \
  template void gemmHalf<T>(bool, bool, int64_t, int64_t, int64_t, const T *,  \
                            int64_t, const T *, int64_t, T *, int64_t,         \
                            float *);                                          \
  template void batchedGemmHalf<T>(const BatchLayout &, bool, bool, int64_t,   \
                                   int64_t, int64_t, const T *, int64_t,       \
                                   const T *, int64_t, T *, int64_t, float *);
MNEMO_INSTANTIATE_HALF(bf16_t)
MNEMO_INSTANTIATE_HALF(f16_t)
#undef MNEMO_INSTANTIATE_HALF

} // namespace mnemo::cpu
