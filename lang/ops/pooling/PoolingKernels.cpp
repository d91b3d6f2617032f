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
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cstring>
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
          pooling::forEachWindowHolding(s, ih, iw, [&](int64_t oh, int64_t ow) {
            acc += contribution.gather(plane, p, oh, ow, ih * s.w + iw);
          });
          dx[(p * s.h + ih) * s.w + iw] = T(acc);
        }
    }
  });
}

/// Max pooling's gradient: each window's first maximum (or last NaN) gets
/// the window's gradient.
template <typename T> struct FirstMaximum {
  const PoolShape &s;
  const T *dy;
  float g(int64_t p, int64_t oh, int64_t ow) const {
    return float(dy[(p * s.ho + oh) * s.wo + ow]);
  }
  static int64_t argmax(const PoolShape &s, const T *plane, int64_t oh,
                        int64_t ow) {
    return pooling::windowArgmax<float>(
        s, oh, ow, [plane](int64_t i) { return float(plane[i]); });
  }
  template <typename Add>
  void scatter(const T *plane, int64_t p, int64_t oh, int64_t ow,
               Add add) const {
    add(argmax(s, plane, oh, ow), g(p, oh, ow));
  }
  float gather(const T *plane, int64_t p, int64_t oh, int64_t ow,
               int64_t at) const {
    return argmax(s, plane, oh, ow) == at ? g(p, oh, ow) : 0.0f;
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
    pooling::Window win = pooling::windowOf(s, oh, ow);
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw)
        add(ih * s.w + iw, share);
  }
  float gather(const T *, int64_t p, int64_t oh, int64_t ow, int64_t) const {
    return g(p, oh, ow);
  }
};

/// Every window of every plane, as PoolingFormulas.h's poolWindow.
template <bool IsMax, typename T>
void poolWindows(const PoolShape &s, const T *x, T *y) {
  parallelFor(s.nc, rowGrain(s.h * s.w), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T *plane = x + p * s.h * s.w;
      auto at = [plane](int64_t i) { return float(plane[i]); };
      for (int64_t oh = 0; oh < s.ho; ++oh)
        for (int64_t ow = 0; ow < s.wo; ++ow)
          y[(p * s.ho + oh) * s.wo + ow] =
              T(pooling::poolWindow<IsMax, float>(s, oh, ow, at));
    }
  });
}

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
  poolWindows<true>(s, x, y);
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
            bool rowHasNan = false;
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
              rowHasNan |= (a != a) | (b != b) | (c != c) | (d != d);
            }
            // A window that holds a NaN gives its gradient to its last NaN
            // (PyTorch's choice): such a row again, apart, through
            // windowArgmax, so that the loop above stays branch-free.
            if (rowHasNan) {
              int64_t oh = r % s.ho, plane = (r / s.ho) * s.h * s.w;
              for (int64_t ow = 0; ow < s.wo; ++ow) {
                dtop[2 * ow] = dtop[2 * ow + 1] = T(0.0f);
                dbottom[2 * ow] = dbottom[2 * ow + 1] = T(0.0f);
                dx[plane + FirstMaximum<T>::argmax(s, x + plane, oh, ow)] =
                    g[ow];
              }
            }
          }
        });
    return;
  }
  poolGradient(s, x, dx, FirstMaximum<T>{s, dy});
}

template <typename T> void avgPool2d(const PoolShape &s, const T *x, T *y) {
  poolWindows<false>(s, x, y);
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
