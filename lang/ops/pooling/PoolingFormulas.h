//===- PoolingFormulas.h - What 2-D pooling computes ------------*- C++ -*-===//
//
// The windows of max and average pooling, stated once: where a window lies
// in its plane, what it computes (a maximum that propagates a NaN, or a
// mean that counts the padding as zeros), which input takes a max window's
// gradient, and which windows hold an input (a gradient as a gather). The
// reference interpreter evaluates them in double (PoolingInterpreter.cpp),
// the CPU kernels (PoolingKernels.cpp, besides their 2x2 halving paths)
// and the CUDA kernels (PoolingKernels.cuh, to which NVRTC gives this file
// by name) in f32. Tensors are NCHW; N and C are one dimension of planes.
//
// It includes nothing but the formula macros: NVRTC compiles without a C++
// standard library.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_POOLING_POOLINGFORMULAS_H
#define MNEMO_LANG_OPS_POOLING_POOLINGFORMULAS_H

#include "lang/ops/elementwise/ElementwiseFormulas.h"

namespace mnemo::pooling {

/// The ops' getPoolGeometry(), in its order. Generated code spells it as
/// an aggregate (PoolingEmission.cpp).
struct PoolShape {
  long long nc, h, w, ho, wo;
  long long kh, kw, strideH, strideW, padH, padW;
};

/// The part of output (oh, ow)'s window inside the plane: rows [h0, h1),
/// columns [w0, w1). It is never empty: the shape rules keep the padding
/// within half the window (as PyTorch does).
struct Window {
  long long h0, h1, w0, w1;
};
MNEMO_FORMULA Window windowOf(const PoolShape &s, long long oh, long long ow) {
  long long top = oh * s.strideH - s.padH, left = ow * s.strideW - s.padW;
  return {top > 0 ? top : 0, top + s.kh < s.h ? top + s.kh : s.h,
          left > 0 ? left : 0, left + s.kw < s.w ? left + s.kw : s.w};
}

/// What window (oh, ow) computes from `at(i)`, the plane's element i: its
/// maximum, a NaN where it holds one (NaN compares false; PyTorch's
/// max_pool propagates it), or its mean with the padding counted as zeros.
template <bool IsMax, typename T, typename At>
MNEMO_FORMULA T poolWindow(const PoolShape &s, long long oh, long long ow,
                           At at) {
  Window win = windowOf(s, oh, ow);
  T acc = IsMax ? at(win.h0 * s.w + win.w0) : T(0);
  for (long long ih = win.h0; ih < win.h1; ++ih)
    for (long long iw = win.w0; iw < win.w1; ++iw) {
      T v = at(ih * s.w + iw);
      if (IsMax)
        acc = acc > v || acc != acc ? acc : v;
      else
        acc += v;
    }
  return IsMax ? acc : acc / T(s.kh * s.kw);
}

/// The input that takes max window (oh, ow)'s gradient, as an index into
/// the plane: its first maximum in row-major order, or its last NaN
/// (PyTorch's choice).
template <typename T, typename At>
MNEMO_FORMULA long long windowArgmax(const PoolShape &s, long long oh,
                                     long long ow, At at) {
  Window win = windowOf(s, oh, ow);
  long long best = win.h0 * s.w + win.w0;
  T bestValue = at(best);
  for (long long ih = win.h0; ih < win.h1; ++ih)
    for (long long iw = win.w0; iw < win.w1; ++iw) {
      T v = at(ih * s.w + iw);
      if (v > bestValue || v != v) {
        bestValue = v;
        best = ih * s.w + iw;
      }
    }
  return best;
}

/// Calls f(oh, ow) for each output whose window holds input (ih, iw): a
/// gradient as a gather, with no scratch to accumulate in.
template <typename F>
MNEMO_FORMULA void forEachWindowHolding(const PoolShape &s, long long ih,
                                        long long iw, F f) {
  long long oh0 = (ih + s.padH - s.kh + s.strideH) / s.strideH,
            oh1 = (ih + s.padH) / s.strideH;
  long long ow0 = (iw + s.padW - s.kw + s.strideW) / s.strideW,
            ow1 = (iw + s.padW) / s.strideW;
  for (long long oh = oh0 > 0 ? oh0 : 0; oh <= oh1 && oh < s.ho; ++oh)
    for (long long ow = ow0 > 0 ? ow0 : 0; ow <= ow1 && ow < s.wo; ++ow)
      if (ih >= oh * s.strideH - s.padH && iw >= ow * s.strideW - s.padW)
        f(oh, ow);
}

} // namespace mnemo::pooling

#endif // MNEMO_LANG_OPS_POOLING_POOLINGFORMULAS_H
