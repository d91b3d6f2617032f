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

namespace {

/// The output columns [begin, end) whose input column ow * stride - pad +
/// kw lies inside [0, w).
void validColumns(const ConvShape &s, int64_t kw, int64_t &begin,
                  int64_t &end) {
  int64_t shift = kw - s.padW; // iw = ow * stride + shift
  begin = shift >= 0 ? 0 : (-shift + s.strideW - 1) / s.strideW;
  end = s.w - shift <= 0 ? 0 : (s.w - shift + s.strideW - 1) / s.strideW;
  end = std::min(end, s.wo);
  begin = std::min(begin, end);
}

/// col[(c, kh, kw), (g, oh, ow)] for images [first, first + g).
void im2col(const ConvShape &s, const float *x, int64_t first, int64_t g,
            float *col) {
  int64_t spatial = s.ho * s.wo, width = g * spatial;
  int64_t rows = s.c * s.kh * s.kw;
  parallelFor(rows, rowGrain(width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t c = r / (s.kh * s.kw), kh = (r / s.kw) % s.kh, kw = r % s.kw;
      int64_t lo, hi;
      validColumns(s, kw, lo, hi);
      int64_t shift = kw - s.padW;
      float *out = col + r * width;
      for (int64_t img = 0; img < g; ++img) {
        const float *plane = x + ((first + img) * s.c + c) * s.h * s.w;
        for (int64_t oh = 0; oh < s.ho; ++oh) {
          int64_t ih = oh * s.strideH - s.padH + kh;
          float *dst = out + img * spatial + oh * s.wo;
          if (ih < 0 || ih >= s.h) {
            std::fill(dst, dst + s.wo, 0.0f);
            continue;
          }
          const float *src = plane + ih * s.w + shift;
          std::fill(dst, dst + lo, 0.0f);
          if (s.strideW == 1)
            std::memcpy(dst + lo, src + lo, sizeof(float) * (hi - lo));
          else
            for (int64_t ow = lo; ow < hi; ++ow)
              dst[ow] = src[ow * s.strideW];
          std::fill(dst + hi, dst + s.wo, 0.0f);
        }
      }
    }
  });
}

/// The reverse of im2col: accumulates col back into dx (zeroed by the
/// caller) for images [first, first + g).
void col2im(const ConvShape &s, const float *col, int64_t first, int64_t g,
            float *dx) {
  int64_t spatial = s.ho * s.wo, width = g * spatial;
  // Parallel over (image, channel) planes: each writes its own plane.
  parallelFor(g * s.c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t img = p / s.c, c = p % s.c;
      float *plane = dx + ((first + img) * s.c + c) * s.h * s.w;
      for (int64_t kh = 0; kh < s.kh; ++kh)
        for (int64_t kw = 0; kw < s.kw; ++kw) {
          int64_t lo, hi;
          validColumns(s, kw, lo, hi);
          int64_t shift = kw - s.padW;
          const float *src =
              col + ((c * s.kh + kh) * s.kw + kw) * width + img * spatial;
          for (int64_t oh = 0; oh < s.ho; ++oh) {
            int64_t ih = oh * s.strideH - s.padH + kh;
            if (ih < 0 || ih >= s.h)
              continue;
            float *dst = plane + ih * s.w + shift;
            const float *row = src + oh * s.wo;
            for (int64_t ow = lo; ow < hi; ++ow)
              dst[ow * s.strideW] += row[ow];
          }
        }
    }
  });
}

} // namespace

void conv2d(const ConvShape &s, const float *x, const float *w, float *y,
            float *workspace) {
  int64_t ckk = s.c * s.kh * s.kw, spatial = s.ho * s.wo;
  for (int64_t first = 0; first < s.n; first += s.imagesPerGemm) {
    int64_t g = std::min(s.imagesPerGemm, s.n - first);
    float *col = workspace, *out = workspace + s.imagesPerGemm * ckk * spatial;
    im2col(s, x, first, g, col);
    // One GEMM over the chunk's images, then each image's rows to NCHW:
    // out[o, (n, spatial)] = w[o, ckk] * col[ckk, (n, spatial)].
    gemm(false, false, s.o, g * spatial, ckk, 1.0f, w, ckk, col, g * spatial,
         0.0f, out, g * spatial);
    parallelFor(g * s.o, 16, [&](int64_t begin, int64_t end) {
      for (int64_t q = begin; q < end; ++q) {
        int64_t img = q / s.o, o = q % s.o;
        std::memcpy(y + ((first + img) * s.o + o) * spatial,
                    out + o * g * spatial + img * spatial,
                    sizeof(float) * spatial);
      }
    });
  }
}

void conv2dInputGrad(const ConvShape &s, const float *dy, const float *w,
                     float *dx, float *workspace) {
  int64_t ckk = s.c * s.kh * s.kw, spatial = s.ho * s.wo;
  std::fill(dx, dx + s.n * s.c * s.h * s.w, 0.0f);
  for (int64_t first = 0; first < s.n; first += s.imagesPerGemm) {
    int64_t g = std::min(s.imagesPerGemm, s.n - first);
    // Gather the chunk's output gradient as [o, (n, spatial)], then one
    // GEMM: col[ckk, (n, spatial)] = w^T[ckk, o] * grad[o, (n, spatial)].
    float *grad = workspace + s.imagesPerGemm * ckk * spatial;
    parallelFor(g * s.o, 16, [&](int64_t begin, int64_t end) {
      for (int64_t q = begin; q < end; ++q) {
        int64_t img = q / s.o, o = q % s.o;
        std::memcpy(grad + o * g * spatial + img * spatial,
                    dy + ((first + img) * s.o + o) * spatial,
                    sizeof(float) * spatial);
      }
    });
    gemm(true, false, ckk, g * spatial, s.o, 1.0f, w, ckk, grad, g * spatial,
         0.0f, workspace, g * spatial);
    col2im(s, workspace, first, g, dx);
  }
}

void conv2dWeightGrad(const ConvShape &s, const float *dy, const float *x,
                      float *dw, float *workspace) {

  int64_t ckk = s.c * s.kh * s.kw, spatial = s.ho * s.wo;
  for (int64_t first = 0; first < s.n; first += s.imagesPerGemm) {
    int64_t g = std::min(s.imagesPerGemm, s.n - first);
    float *col = workspace, *grad = workspace + s.imagesPerGemm * ckk * spatial;
    im2col(s, x, first, g, col);
    for (int64_t img = 0; img < g; ++img)
      for (int64_t o = 0; o < s.o; ++o)
        std::memcpy(grad + o * g * spatial + img * spatial,
                    dy + ((first + img) * s.o + o) * spatial,
                    sizeof(float) * spatial);
    // dw[o, ckk] (+)= grad[o, (g, spatial)] * col^T[(g, spatial), ckk]
    gemm(false, true, s.o, ckk, g * spatial, 1.0f, grad, g * spatial, col,
         g * spatial, first == 0 ? 0.0f : 1.0f, dw, ckk);
  }
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

template <typename T> void narrow(const float *x, int64_t n, T *out) {
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = T(x[i]);
  });
}
template <typename T> void widen(const T *x, int64_t n, float *out) {
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = float(x[i]);
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

template <typename T>
void conv2dHalf(int kind, const ConvShape &s, const T *first, const T *second,
                T *result, float *workspace) {
  int64_t x = s.n * s.c * s.h * s.w, w = s.o * s.c * s.kh * s.kw,
          y = s.n * s.o * s.ho * s.wo;
  // The f32 kernel's scratch first, then the widened operands and result.
  float *scratch = workspace;
  float *wide =
      scratch + s.imagesPerGemm * (s.c * s.kh * s.kw + s.o) * s.ho * s.wo;
  int64_t firstSize = kind == 0 ? x : y, secondSize = kind == 2 ? x : w,
          resultSize = kind == 0   ? y
                       : kind == 1 ? x
                                   : w;
  float *first32 = wide, *second32 = first32 + firstSize,
        *result32 = second32 + secondSize;
  widen(first, firstSize, first32);
  widen(second, secondSize, second32);
  if (kind == 0)
    conv2d(s, first32, second32, result32, scratch);
  else if (kind == 1)
    conv2dInputGrad(s, first32, second32, result32, scratch);
  else
    conv2dWeightGrad(s, first32, second32, result32, scratch);
  narrow(result32, resultSize, result);
}

#define MNEMO_INSTANTIATE_HALF(T)                                              \
  template void gemmHalf<T>(bool, bool, int64_t, int64_t, int64_t, const T *,  \
                            int64_t, const T *, int64_t, T *, int64_t,         \
                            float *);                                          \
  template void batchedGemmHalf<T>(const BatchLayout &, bool, bool, int64_t,   \
                                   int64_t, int64_t, const T *, int64_t,       \
                                   const T *, int64_t, T *, int64_t, float *); \
  template void conv2dHalf<T>(int, const ConvShape &, const T *, const T *,    \
                              T *, float *);
MNEMO_INSTANTIATE_HALF(bf16_t)
MNEMO_INSTANTIATE_HALF(f16_t)
#undef MNEMO_INSTANTIATE_HALF

} // namespace cpu
} // namespace mnemo
