//===- PoolingKernels.cpp - 2-D pooling on the CPU ------------------------===//
//
// Part of the trainer's runtime (built with the CPU kernels, and copied
// into --emit=project trees): plain C++17, no LLVM. f32 storage has its own
// kernels (2x2 halving windows fast); 16-bit storage computes in f32 and
// takes its gradients as gathers.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/pooling/PoolingKernels.h"
#include "runtime/cpu/Half.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace mnemo {
namespace cpu {

namespace {
/// The common case: 2x2 windows, stride 2, no padding, even sizes.
bool isHalving(const PoolShape &s) {
  return s.kh == 2 && s.kw == 2 && s.strideH == 2 && s.strideW == 2 &&
         s.padH == 0 && s.padW == 0 && s.ho * 2 == s.h && s.wo * 2 == s.w;
}
} // namespace

void maxPool2d(const PoolShape &s, const float *x, float *y) {
  if (isHalving(s)) {
    parallelFor(
        s.nc * s.ho, rowGrain(2 * s.w), [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const float *top = x + r * 2 * s.w, *bottom = top + s.w;
            float *out = y + r * s.wo;
            for (int64_t ow = 0; ow < s.wo; ++ow)
              out[ow] = nanMax(nanMax(top[2 * ow], top[2 * ow + 1]),
                               nanMax(bottom[2 * ow], bottom[2 * ow + 1]));
          }
        });
    return;
  }
  parallelFor(s.nc, rowGrain(s.h * s.w), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const float *plane = x + p * s.h * s.w;
      float *out = y + p * s.ho * s.wo;
      for (int64_t oh = 0; oh < s.ho; ++oh) {
        int64_t h0 = std::max<int64_t>(0, oh * s.strideH - s.padH);
        int64_t h1 = std::min<int64_t>(s.h, oh * s.strideH - s.padH + s.kh);
        for (int64_t ow = 0; ow < s.wo; ++ow) {
          int64_t w0 = std::max<int64_t>(0, ow * s.strideW - s.padW);
          int64_t w1 = std::min<int64_t>(s.w, ow * s.strideW - s.padW + s.kw);
          float best = -std::numeric_limits<float>::infinity();
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw)
              best = nanMax(best, plane[ih * s.w + iw]);
          out[oh * s.wo + ow] = best;
        }
      }
    }
  });
}

void maxPool2dGrad(const PoolShape &s, const float *dy, const float *x,
                   float *dx) {
  if (isHalving(s)) {
    parallelFor(
        s.nc * s.ho, rowGrain(2 * s.w), [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const float *top = x + r * 2 * s.w, *bottom = top + s.w;
            float *dtop = dx + r * 2 * s.w, *dbottom = dtop + s.w;
            const float *g = dy + r * s.wo;
            for (int64_t ow = 0; ow < s.wo; ++ow) {
              float a = top[2 * ow], b = top[2 * ow + 1], c = bottom[2 * ow],
                    d = bottom[2 * ow + 1];
              float m = std::max(std::max(a, b), std::max(c, d));
              // The first maximum in row-major order gets the gradient. Bit
              // masks, not branches or selects: which element wins is random,
              // and compilers turn the selects into mispredicted branches.
              uint32_t isA = -uint32_t(a == m), isB = -uint32_t(b == m) & ~isA;
              uint32_t isC = -uint32_t(c == m) & ~(isA | isB);
              uint32_t isD = ~(isA | isB | isC);
              uint32_t bits;
              std::memcpy(&bits, &g[ow], 4);
              uint32_t out[4] = {bits & isA, bits & isB, bits & isC,
                                 bits & isD};
              std::memcpy(&dtop[2 * ow], &out[0], 8);
              std::memcpy(&dbottom[2 * ow], &out[2], 8);
            }
          }
        });
    return;
  }
  parallelFor(s.nc, rowGrain(s.h * s.w), [&](int64_t begin, int64_t end) {
    std::fill(dx + begin * s.h * s.w, dx + end * s.h * s.w, 0.0f);
    for (int64_t p = begin; p < end; ++p) {
      const float *plane = x + p * s.h * s.w;
      float *dplane = dx + p * s.h * s.w;
      const float *g = dy + p * s.ho * s.wo;
      for (int64_t oh = 0; oh < s.ho; ++oh) {
        int64_t h0 = std::max<int64_t>(0, oh * s.strideH - s.padH);
        int64_t h1 = std::min<int64_t>(s.h, oh * s.strideH - s.padH + s.kh);
        for (int64_t ow = 0; ow < s.wo; ++ow) {
          int64_t w0 = std::max<int64_t>(0, ow * s.strideW - s.padW);
          int64_t w1 = std::min<int64_t>(s.w, ow * s.strideW - s.padW + s.kw);
          // The first maximum of the window gets the gradient (PyTorch).
          int64_t at = -1;
          float best = 0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw)
              if (at < 0 || plane[ih * s.w + iw] > best) {
                best = plane[ih * s.w + iw];
                at = ih * s.w + iw;
              }
          if (at >= 0)
            dplane[at] += g[oh * s.wo + ow];
        }
      }
    }
  });
}

void avgPool2d(const PoolShape &s, const float *x, float *y) {
  float window = float(s.kh * s.kw);
  parallelFor(s.nc, rowGrain(s.h * s.w), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t oh = 0; oh < s.ho; ++oh)
        for (int64_t ow = 0; ow < s.wo; ++ow) {
          float sum = 0;
          for (int64_t kh = 0; kh < s.kh; ++kh) {
            int64_t ih = oh * s.strideH - s.padH + kh;
            if (ih < 0 || ih >= s.h)
              continue;
            for (int64_t kw = 0; kw < s.kw; ++kw) {
              int64_t iw = ow * s.strideW - s.padW + kw;
              if (iw >= 0 && iw < s.w)
                sum += x[(p * s.h + ih) * s.w + iw];
            }
          }
          y[(p * s.ho + oh) * s.wo + ow] = sum / window;
        }
  });
}

void avgPool2dGrad(const PoolShape &s, const float *dy, float *dx) {
  float window = float(s.kh * s.kw);
  parallelFor(s.nc, rowGrain(s.h * s.w), [&](int64_t begin, int64_t end) {
    std::fill(dx + begin * s.h * s.w, dx + end * s.h * s.w, 0.0f);
    for (int64_t p = begin; p < end; ++p)
      for (int64_t oh = 0; oh < s.ho; ++oh)
        for (int64_t ow = 0; ow < s.wo; ++ow) {
          float g = dy[(p * s.ho + oh) * s.wo + ow] / window;
          for (int64_t kh = 0; kh < s.kh; ++kh) {
            int64_t ih = oh * s.strideH - s.padH + kh;
            if (ih < 0 || ih >= s.h)
              continue;
            for (int64_t kw = 0; kw < s.kw; ++kw) {
              int64_t iw = ow * s.strideW - s.padW + kw;
              if (iw >= 0 && iw < s.w)
                dx[(p * s.h + ih) * s.w + iw] += g;
            }
          }
        }
  });
}

namespace {
/// A pooling forward on 16-bit storage: each output is `finish` of the
/// f32 fold of its window's inputs (padding is left out).
template <typename T, typename Fold, typename Finish>
void pool2dHalf(const PoolShape &s, const T *x, T *y, float start, Fold fold,
                Finish finish) {
  parallelFor(s.nc, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t oh = 0; oh < s.ho; ++oh)
        for (int64_t ow = 0; ow < s.wo; ++ow) {
          float acc = start;
          for (int64_t ih = std::max<int64_t>(0, oh * s.strideH - s.padH);
               ih < std::min<int64_t>(s.h, oh * s.strideH - s.padH + s.kh);
               ++ih)
            for (int64_t iw = std::max<int64_t>(0, ow * s.strideW - s.padW);
                 iw < std::min<int64_t>(s.w, ow * s.strideW - s.padW + s.kw);
                 ++iw)
              acc = fold(acc, float(x[(p * s.h + ih) * s.w + iw]));
          y[(p * s.ho + oh) * s.wo + ow] = T(finish(acc));
        }
  });
}
} // namespace

template <typename T> void maxPool2dHalf(const PoolShape &s, const T *x, T *y) {
  pool2dHalf(
      s, x, y, -std::numeric_limits<float>::infinity(),
      [](float acc, float v) { return nanMax(acc, v); },
      [](float acc) { return acc; });
}

namespace {
/// The first maximum of a window, row-major (PyTorch's choice), as an
/// index into the plane.
template <typename T>
int64_t windowArgmax(const PoolShape &s, const T *plane, int64_t oh,
                     int64_t ow) {
  int64_t at = -1;
  float best = 0;
  for (int64_t ih = std::max<int64_t>(0, oh * s.strideH - s.padH);
       ih < std::min<int64_t>(s.h, oh * s.strideH - s.padH + s.kh); ++ih)
    for (int64_t iw = std::max<int64_t>(0, ow * s.strideW - s.padW);
         iw < std::min<int64_t>(s.w, ow * s.strideW - s.padW + s.kw); ++iw) {
      float v = float(plane[ih * s.w + iw]);
      if (at < 0 || v > best) {
        best = v;
        at = ih * s.w + iw;
      }
    }
  return at;
}

/// Calls f(oh, ow) for every output window that contains input (ih, iw):
/// pooling gradients as gathers, with no scratch to accumulate in.
template <typename F>
void windowsContaining(const PoolShape &s, int64_t ih, int64_t iw, F f) {
  int64_t oh0 =
      std::max<int64_t>(0, (ih + s.padH - s.kh + s.strideH) / s.strideH);
  int64_t ow0 =
      std::max<int64_t>(0, (iw + s.padW - s.kw + s.strideW) / s.strideW);
  for (int64_t oh = oh0; oh <= std::min(s.ho - 1, (ih + s.padH) / s.strideH);
       ++oh)
    for (int64_t ow = ow0; ow <= std::min(s.wo - 1, (iw + s.padW) / s.strideW);
         ++ow)
      if (ih >= oh * s.strideH - s.padH && iw >= ow * s.strideW - s.padW)
        f(oh, ow);
}
} // namespace

template <typename T>
void maxPool2dGradHalf(const PoolShape &s, const T *dy, const T *x, T *dx) {
  parallelFor(s.nc, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T *plane = x + p * s.h * s.w;
      for (int64_t ih = 0; ih < s.h; ++ih)
        for (int64_t iw = 0; iw < s.w; ++iw) {
          float acc = 0;
          windowsContaining(s, ih, iw, [&](int64_t oh, int64_t ow) {
            if (windowArgmax(s, plane, oh, ow) == ih * s.w + iw)
              acc += float(dy[(p * s.ho + oh) * s.wo + ow]);
          });
          dx[(p * s.h + ih) * s.w + iw] = T(acc);
        }
    }
  });
}

template <typename T> void avgPool2dHalf(const PoolShape &s, const T *x, T *y) {
  float window = float(s.kh * s.kw);
  pool2dHalf(
      s, x, y, 0.0f, [](float acc, float v) { return acc + v; },
      [window](float acc) { return acc / window; });
}

template <typename T>
void avgPool2dGradHalf(const PoolShape &s, const T *dy, T *dx) {
  float window = float(s.kh * s.kw);
  parallelFor(s.nc, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t ih = 0; ih < s.h; ++ih)
        for (int64_t iw = 0; iw < s.w; ++iw) {
          float acc = 0;
          windowsContaining(s, ih, iw, [&](int64_t oh, int64_t ow) {
            acc += float(dy[(p * s.ho + oh) * s.wo + ow]) / window;
          });
          dx[(p * s.h + ih) * s.w + iw] = T(acc);
        }
  });
}

#define MNEMO_INSTANTIATE_POOLING(T)                                           \
  template void maxPool2dHalf<T>(const PoolShape &, const T *, T *);           \
  template void maxPool2dGradHalf<T>(const PoolShape &, const T *, const T *,  \
                                     T *);                                     \
  template void avgPool2dHalf<T>(const PoolShape &, const T *, T *);           \
  template void avgPool2dGradHalf<T>(const PoolShape &, const T *, T *);
MNEMO_INSTANTIATE_POOLING(bf16_t)
MNEMO_INSTANTIATE_POOLING(f16_t)
#undef MNEMO_INSTANTIATE_POOLING

} // namespace cpu
} // namespace mnemo
