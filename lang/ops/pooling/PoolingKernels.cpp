//===- PoolingKernels.cpp - 2-D pooling on the CPU ------------------------===//
//
// Part of the trainer's runtime (built with the CPU kernels, and copied
// into --emit=project trees): plain C++17, no LLVM. One template for every
// storage type, computing in f32 (2x2 halving windows fast). A gradient is
// scattered where each input lies in one window at most, and is gathered
// into 16-bit storage where windows overlap, so that each element is
// rounded once.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/pooling/PoolingKernels.h"
#include "runtime/cpu/Half.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

namespace mnemo::cpu {

namespace {
/// The common case: 2x2 windows, stride 2, no padding, even sizes.
bool isHalving(const PoolShape &s) {
  return s.kh == 2 && s.kw == 2 && s.strideH == 2 && s.strideW == 2 &&
         s.padH == 0 && s.padW == 0 && s.ho * 2 == s.h && s.wo * 2 == s.w;
}

/// Whether every input lies in one window at most: a gradient scattered
/// into zeros then writes each element once, which rounds it once.
bool windowsDisjoint(const PoolShape &s) {
  return s.strideH >= s.kh && s.strideW >= s.kw;
}

/// All ones where `c`, else zeros.
template <typename Bits> Bits maskIf(bool c) { return Bits(-Bits(c)); }

/// The first maximum of a window, row-major (PyTorch's choice), as an
/// index into the plane; -1 for a window entirely in the padding.
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
/// a gradient as a gather, with no scratch to accumulate in.
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

/// dx from each window's gradient as `contribution` spreads it: its
/// scatter(plane, p, oh, ow, add) calls add(input, g) for each input that
/// window (oh, ow) of plane p gives g; its gather(plane, p, oh, ow, input)
/// is what the window gives that input. Scattered where that rounds each
/// element once (f32 accumulates; disjoint windows write once), gathered
/// in f32 otherwise.
template <typename T, typename Contribution>
void poolGradient(const PoolShape &s, const T *x, T *dx,
                  Contribution contribution) {
  if (std::is_same_v<T, float> || windowsDisjoint(s)) {
    parallelFor(s.nc, rowGrain(s.h * s.w), [&](int64_t begin, int64_t end) {
      std::fill(dx + begin * s.h * s.w, dx + end * s.h * s.w, T(0.0f));
      for (int64_t p = begin; p < end; ++p) {
        const T *plane = x ? x + p * s.h * s.w : nullptr;
        T *dplane = dx + p * s.h * s.w;
        for (int64_t oh = 0; oh < s.ho; ++oh)
          for (int64_t ow = 0; ow < s.wo; ++ow)
            contribution.scatter(plane, p, oh, ow, [&](int64_t at, float g) {
              dplane[at] = T(float(dplane[at]) + g);
            });
      }
    });
    return;
  }
  parallelFor(s.nc, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T *plane = x ? x + p * s.h * s.w : nullptr;
      for (int64_t ih = 0; ih < s.h; ++ih)
        for (int64_t iw = 0; iw < s.w; ++iw) {
          float acc = 0;
          windowsContaining(s, ih, iw, [&](int64_t oh, int64_t ow) {
            acc += contribution.gather(plane, p, oh, ow, ih * s.w + iw);
          });
          dx[(p * s.h + ih) * s.w + iw] = T(acc);
        }
    }
  });
}

/// Max pooling's gradient: each window's first maximum gets the window's
/// gradient.
template <typename T> struct FirstMaximum {
  const PoolShape &s;
  const T *dy;
  float g(int64_t p, int64_t oh, int64_t ow) const {
    return float(dy[(p * s.ho + oh) * s.wo + ow]);
  }
  template <typename Add>
  void scatter(const T *plane, int64_t p, int64_t oh, int64_t ow,
               Add add) const {
    int64_t at = windowArgmax(s, plane, oh, ow);
    if (at >= 0)
      add(at, g(p, oh, ow));
  }
  float gather(const T *plane, int64_t p, int64_t oh, int64_t ow,
               int64_t at) const {
    return windowArgmax(s, plane, oh, ow) == at ? g(p, oh, ow) : 0.0f;
  }
};

/// Average pooling's gradient: every input of a window gets the window's
/// gradient over its size (padding included).
template <typename T> struct EveryInput {
  const PoolShape &s;
  const T *dy;
  float g(int64_t p, int64_t oh, int64_t ow) const {
    return float(dy[(p * s.ho + oh) * s.wo + ow]) / float(s.kh * s.kw);
  }
  template <typename Add>
  void scatter(const T *, int64_t p, int64_t oh, int64_t ow, Add add) const {
    float share = g(p, oh, ow);
    for (int64_t ih = std::max<int64_t>(0, oh * s.strideH - s.padH);
         ih < std::min<int64_t>(s.h, oh * s.strideH - s.padH + s.kh); ++ih)
      for (int64_t iw = std::max<int64_t>(0, ow * s.strideW - s.padW);
           iw < std::min<int64_t>(s.w, ow * s.strideW - s.padW + s.kw); ++iw)
        add(ih * s.w + iw, share);
  }
  float gather(const T *, int64_t p, int64_t oh, int64_t ow, int64_t) const {
    return g(p, oh, ow);
  }
};

} // namespace

template <typename T> void maxPool2d(const PoolShape &s, const T *x, T *y) {
  if (isHalving(s)) {
    parallelFor(
        s.nc * s.ho, rowGrain(2 * s.w), [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const T *top = x + r * 2 * s.w, *bottom = top + s.w;
            T *out = y + r * s.wo;
            for (int64_t ow = 0; ow < s.wo; ++ow)
              out[ow] = T(nanMax(
                  nanMax(float(top[2 * ow]), float(top[2 * ow + 1])),
                  nanMax(float(bottom[2 * ow]), float(bottom[2 * ow + 1]))));
          }
        });
    return;
  }
  parallelFor(s.nc, rowGrain(s.h * s.w), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T *plane = x + p * s.h * s.w;
      T *out = y + p * s.ho * s.wo;
      for (int64_t oh = 0; oh < s.ho; ++oh) {
        int64_t h0 = std::max<int64_t>(0, oh * s.strideH - s.padH);
        int64_t h1 = std::min<int64_t>(s.h, oh * s.strideH - s.padH + s.kh);
        for (int64_t ow = 0; ow < s.wo; ++ow) {
          int64_t w0 = std::max<int64_t>(0, ow * s.strideW - s.padW);
          int64_t w1 = std::min<int64_t>(s.w, ow * s.strideW - s.padW + s.kw);
          float best = -std::numeric_limits<float>::infinity();
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw)
              best = nanMax(best, float(plane[ih * s.w + iw]));
          out[oh * s.wo + ow] = T(best);
        }
      }
    }
  });
}

template <typename T>
void maxPool2dGrad(const PoolShape &s, const T *dy, const T *x, T *dx) {
  if (isHalving(s)) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;
    static_assert(sizeof(Bits) == sizeof(T));
    parallelFor(
        s.nc * s.ho, rowGrain(2 * s.w), [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const T *top = x + r * 2 * s.w, *bottom = top + s.w;
            T *dtop = dx + r * 2 * s.w, *dbottom = dtop + s.w;
            const T *g = dy + r * s.wo;
            for (int64_t ow = 0; ow < s.wo; ++ow) {
              float a = float(top[2 * ow]), b = float(top[2 * ow + 1]),
                    c = float(bottom[2 * ow]), d = float(bottom[2 * ow + 1]);
              float m = std::max(std::max(a, b), std::max(c, d));
              // The first maximum in row-major order gets the gradient. Bit
              // masks, not branches or selects: which element wins is random,
              // and compilers turn the selects into mispredicted branches.
              Bits isA = maskIf<Bits>(a == m);
              Bits isB = maskIf<Bits>(b == m) & Bits(~isA);
              Bits isC = maskIf<Bits>(c == m) & Bits(~(isA | isB));
              Bits isD = Bits(~(isA | isB | isC));
              Bits bits;
              std::memcpy(&bits, &g[ow], sizeof(T));
              Bits out[4] = {Bits(bits & isA), Bits(bits & isB),
                             Bits(bits & isC), Bits(bits & isD)};
              std::memcpy(&dtop[2 * ow], &out[0], 2 * sizeof(T));
              std::memcpy(&dbottom[2 * ow], &out[2], 2 * sizeof(T));
            }
          }
        });
    return;
  }
  poolGradient(s, x, dx, FirstMaximum<T>{s, dy});
}

template <typename T> void avgPool2d(const PoolShape &s, const T *x, T *y) {
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
                sum += float(x[(p * s.h + ih) * s.w + iw]);
            }
          }
          y[(p * s.ho + oh) * s.wo + ow] = T(sum / window);
        }
  });
}

template <typename T>
void avgPool2dGrad(const PoolShape &s, const T *dy, T *dx) {
  poolGradient(s, static_cast<const T *>(nullptr), dx, EveryInput<T>{s, dy});
}

#define MNEMO_INSTANTIATE_POOLING(T)                                           \
  template void maxPool2d<T>(const PoolShape &, const T *, T *);               \
  template void maxPool2dGrad<T>(const PoolShape &, const T *, const T *,      \
                                 T *);                                         \
  template void avgPool2d<T>(const PoolShape &, const T *, T *);               \
  template void avgPool2dGrad<T>(const PoolShape &, const T *, T *);
MNEMO_INSTANTIATE_POOLING(float)
MNEMO_INSTANTIATE_POOLING(bf16_t)
MNEMO_INSTANTIATE_POOLING(f16_t)
#undef MNEMO_INSTANTIATE_POOLING

} // namespace mnemo::cpu
