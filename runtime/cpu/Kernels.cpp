//===- Kernels.cpp - The CPU backend's kernels ----------------------------===//

#include "runtime/cpu/Kernels.h"
#include "lang/ops/quantization/QuantizationFormulas.h"
#include "runtime/AdamRules.h"
#include "runtime/Quantize8.h"

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
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

namespace mnemo {
namespace cpu {

namespace {
std::mutex errorMutex;
std::string firstError;
} // namespace

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

//===----------------------------------------------------------------------===//
// The optimizer
//===----------------------------------------------------------------------===//

float lrSchedule(bool cosine, int64_t step, int64_t totalSteps, double baseLr,
                 int64_t warmup, int64_t steps, double minLr) {
  double total = steps > 0 ? double(steps) : double(totalSteps);
  double lr = baseLr;
  if (warmup > 0 && step <= warmup) {
    lr = baseLr * double(step) / double(warmup);
  } else if (cosine) {
    double progress =
        (double(step) - double(warmup)) / std::max(1.0, total - double(warmup));
    progress = std::min(1.0, std::max(0.0, progress));
    lr = minLr + (baseLr - minLr) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return float(lr);
}

float globalNorm(const float *const *tensors, const int64_t *sizes, int count) {
  // Each tensor in a fixed number of chunks (a function of its size and
  // the thread count only), summed in chunk order: deterministic.
  double total = 0;
  constexpr int64_t kMaxChunks = 64;
  double partial[kMaxChunks];
  for (int t = 0; t < count; ++t) {
    const float *x = tensors[t];
    int64_t n = sizes[t];
    int64_t chunks = std::min<int64_t>(
        {kMaxChunks, int64_t(threads()), std::max<int64_t>(1, n / kGrain)});
    parallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        double s = 0;
        for (int64_t i = n * c / chunks; i < n * (c + 1) / chunks; ++i)
          s += double(x[i]) * double(x[i]);
        partial[c] = s;
      }
    });
    for (int64_t c = 0; c < chunks; ++c)
      total += partial[c];
  }
  return float(std::sqrt(total));
}

void lossScaleUpdate(float norm, float scale, float count, float *newScale,
                     float *newCount, float *skip, double growthFactor,
                     double backoffFactor, int64_t growthInterval) {
  bool finite = std::isfinite(norm);
  float next = finite ? count + 1.0f : 0.0f;
  float nextScale = finite ? scale : float(scale * backoffFactor);
  if (finite && next >= float(growthInterval)) {
    nextScale = float(scale * growthFactor);
    next = 0.0f;
  }
  *newScale = nextScale;
  *newCount = next;
  *skip = finite ? 0.0f : 1.0f;
}

float clipCoefficient(float norm, double maxNorm) {
  float coef = float(maxNorm) / (norm + 1e-6f);
  return std::min(coef, 1.0f);
}

void adamUpdate(int64_t n, const float *param, const float *grad,
                const float *expAvg, const float *expAvgSq, float *newParam,
                float *newExpAvg, float *newExpAvgSq, float lr, int64_t step,
                double beta1, double beta2, double eps, double weightDecay,
                bool decoupled, const float *skip) {
  if (skip && *skip != 0.0f) {
    // An overflowed f16 step: everything stays (copied when not in place).
    for (auto [from, to] : {std::pair<const float *, float *>{param, newParam},
                            {expAvg, newExpAvg},
                            {expAvgSq, newExpAvgSq}})
      if (from != to)
        std::memcpy(to, from, sizeof(float) * n);
    return;
  }
  // torch.optim.AdamW's single-tensor arithmetic (runtime/AdamRules.h).
  adam::Scalars s =
      adam::scalars(double(lr), double(step), beta1, beta2, eps, weightDecay);
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float p = param[i], m = expAvg[i], v = expAvgSq[i];
      adam::update(s, decoupled, p, grad[i], m, v);
      newParam[i] = p;
      newExpAvg[i] = m;
      newExpAvgSq[i] = v;
    }
  });
}

void adam8bitUpdate(int64_t n, int64_t block, const float *param,
                    const float *grad, const uint8_t *expAvgCodes,
                    const float *expAvgMax, const uint8_t *expAvgSqCodes,
                    const float *expAvgSqMax, float *newParam,
                    uint8_t *newExpAvgCodes, float *newExpAvgMax,
                    uint8_t *newExpAvgSqCodes, float *newExpAvgSqMax, float lr,
                    int64_t step, double beta1, double beta2, double eps,
                    double weightDecay, const float *skip) {
  int64_t blocks = quant8::blockCount(n, block);
  if (skip && *skip != 0.0f) {
    auto copy = [](const void *from, void *to, size_t bytes) {
      if (from != to)
        std::memcpy(to, from, bytes);
    };
    copy(param, newParam, sizeof(float) * n);
    copy(expAvgCodes, newExpAvgCodes, n);
    copy(expAvgSqCodes, newExpAvgSqCodes, n);
    copy(expAvgMax, newExpAvgMax, sizeof(float) * blocks);
    copy(expAvgSqMax, newExpAvgSqMax, sizeof(float) * blocks);
    return;
  }
  // Blocks are independent: each thread takes whole blocks.
  parallelFor(blocks, 1, [&](int64_t first, int64_t last) {
    int64_t begin = first * block, end = std::min(n, last * block);
    quant8::adamw8bitStep(
        end - begin, block, param + begin, grad + begin, expAvgCodes + begin,
        expAvgMax + first, expAvgSqCodes + begin, expAvgSqMax + first,
        newParam + begin, newExpAvgCodes + begin, newExpAvgMax + first,
        newExpAvgSqCodes + begin, newExpAvgSqMax + first, lr, step, beta1,
        beta2, eps, weightDecay);
  });
}

void sgdUpdate(int64_t n, const float *param, const float *grad,
               const float *buffer, float *newParam, float *newBuffer, float lr,
               int64_t step, double momentum, double dampening,
               double weightDecay, bool nesterov, const float *skip) {
  if (skip && *skip != 0.0f) {
    if (param != newParam)
      std::memcpy(newParam, param, sizeof(float) * n);
    if (newBuffer != buffer)
      std::memcpy(newBuffer, buffer, sizeof(float) * n);
    return;
  }
  float mu = float(momentum), damp = float(1.0 - dampening),
        wd = float(weightDecay);
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float d = wd != 0.0f ? grad[i] + wd * param[i] : grad[i];
      if (mu != 0.0f) {
        float b = step <= 1 ? d : mu * buffer[i] + damp * d;
        newBuffer[i] = b;
        d = nesterov ? d + mu * b : b;
      } else if (newBuffer != buffer) {
        newBuffer[i] = buffer[i];
      }
      newParam[i] = param[i] - lr * d;
    }
  });
}

} // namespace cpu
} // namespace mnemo

//===----------------------------------------------------------------------===//
// 16-bit storage (mixed precision): widen, compute in f32, narrow
//===----------------------------------------------------------------------===//

namespace mnemo {
namespace cpu {

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
  float *a32 = workspace, *b32 = a32 + m * k, *c32 = b32 + k * n;
  widenMatrix(transA, m, k, a, lda, a32);
  widenMatrix(transB, k, n, b, ldb, b32);
  gemm(false, false, m, n, k, 1.0f, a32, k, b32, n, 0.0f, c32, n);
  parallelFor(m, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, n)),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r)
                  for (int64_t j = 0; j < n; ++j)
                    c[r * ldc + j] = T(c32[r * n + j]);
              });
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

} // namespace cpu
} // namespace mnemo
