//===- PoolingKernels.cuh - 2-D pooling on the GPU -------------*- CUDA -*-===//
//
// The device functions the generated kernels call for the pooling ops
// (NCHW): one thread per output; the gradients one thread per input, a
// gather over the windows that contain it (no atomics). Included by the
// generated kernel source after runtime/cuda/Kernels.cuh, whose helpers
// (ld, st, nanMax) it uses; NVRTC is given it by name
// (runtime/cuda/MnemoCuda.cmake), so it includes nothing itself.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_POOLING_POOLINGKERNELS_CUH
#define MNEMO_LANG_OPS_POOLING_POOLINGKERNELS_CUH

namespace mnemo::cuda {

/// The ops' getPoolGeometry(), in its order.
struct PoolShape {
  int64_t nc, h, w, ho, wo;
  int64_t kh, kw, strideH, strideW, padH, padW;
};

template <bool IsMax, typename T>
__device__ void pool2d(const PoolShape &s, const T *x, T *y) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= s.nc * s.ho * s.wo)
    return;
  int64_t ow = e % s.wo, oh = (e / s.wo) % s.ho, p = e / (s.wo * s.ho);
  const T *plane = x + p * s.h * s.w;
  float acc = IsMax ? -INFINITY : 0.0f;
  for (int64_t kh = 0; kh < s.kh; ++kh) {
    int64_t ih = oh * s.strideH - s.padH + kh;
    if (ih < 0 || ih >= s.h)
      continue;
    for (int64_t kw = 0; kw < s.kw; ++kw) {
      int64_t iw = ow * s.strideW - s.padW + kw;
      if (iw < 0 || iw >= s.w)
        continue;
      float v = ld(plane[ih * s.w + iw]);
      acc = IsMax ? nanMax(acc, v) : acc + v;
    }
  }
  y[e] = st<T>(IsMax ? acc : acc / float(s.kh * s.kw));
}

/// The window's first maximum in row-major order (PyTorch's choice).
template <typename T>
__device__ int64_t windowArgmax(const PoolShape &s, const T *plane, int64_t oh,
                                int64_t ow) {
  int64_t at = -1;
  float best = 0;
  for (int64_t ih = max(int64_t(0), oh * s.strideH - s.padH);
       ih < min(s.h, oh * s.strideH - s.padH + s.kh); ++ih)
    for (int64_t iw = max(int64_t(0), ow * s.strideW - s.padW);
         iw < min(s.w, ow * s.strideW - s.padW + s.kw); ++iw)
      if (at < 0 || ld(plane[ih * s.w + iw]) > best ||
          isnan(ld(plane[ih * s.w + iw]))) {
        best = ld(plane[ih * s.w + iw]);
        at = ih * s.w + iw;
      }
  return at;
}

template <bool IsMax, typename T>
__device__ void pool2dGrad(const PoolShape &s, const T *dy, const T *x, T *dx) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= s.nc * s.h * s.w)
    return;
  int64_t iw = e % s.w, ih = (e / s.w) % s.h, p = e / (s.w * s.h);
  const T *g = dy + p * s.ho * s.wo;
  // The outputs whose windows contain (ih, iw).
  int64_t oh0 = max(int64_t(0), (ih + s.padH - s.kh + s.strideH) / s.strideH);
  int64_t oh1 = min(s.ho - 1, (ih + s.padH) / s.strideH);
  int64_t ow0 = max(int64_t(0), (iw + s.padW - s.kw + s.strideW) / s.strideW);
  int64_t ow1 = min(s.wo - 1, (iw + s.padW) / s.strideW);
  float acc = 0;
  for (int64_t oh = oh0; oh <= oh1; ++oh)
    for (int64_t ow = ow0; ow <= ow1; ++ow) {
      if (ih < oh * s.strideH - s.padH || iw < ow * s.strideW - s.padW)
        continue;
      if (IsMax) {
        if (windowArgmax(s, x + p * s.h * s.w, oh, ow) == ih * s.w + iw)
          acc += ld(g[oh * s.wo + ow]);
      } else {
        acc += ld(g[oh * s.wo + ow]) / float(s.kh * s.kw);
      }
    }
  dx[e] = st<T>(acc);
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_POOLING_POOLINGKERNELS_CUH
