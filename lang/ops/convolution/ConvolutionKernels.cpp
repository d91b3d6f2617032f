//===- ConvolutionKernels.cpp - Convolutions on the CPU -------------------===//
//
// NCHW convolutions with OIHW weights by im2col and sgemm (as PyTorch's CPU
// path without oneDNN), over imagesPerGemm images at a time so the GEMMs
// are large and the workspace does not grow with the batch; on 16-bit
// storage, around the f32 kernels. In the trainer's library.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/convolution/ConvolutionKernels.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cstring>

namespace mnemo::cpu {

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

template void conv2dHalf<bf16_t>(int, const ConvShape &, const bf16_t *,
                                 const bf16_t *, bf16_t *, float *);
template void conv2dHalf<f16_t>(int, const ConvShape &, const f16_t *,
                                const f16_t *, f16_t *, float *);

} // namespace mnemo::cpu
