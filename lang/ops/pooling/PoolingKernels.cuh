//===- PoolingKernels.cuh - 2-D pooling on the GPU -------------*- CUDA -*-===//
//
// The device functions the generated kernels call for the pooling ops
// (NCHW): one thread per output; the gradients one thread per input, a
// gather over the windows that contain it (no atomics). Included by the
// generated kernel source after runtime/cuda/Kernels.cuh, whose helpers
// (ld, st) it uses; NVRTC is given it and the windows' formulas,
// PoolingFormulas.h, by name (runtime/cuda/MnemoCuda.cmake).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_POOLING_POOLINGKERNELS_CUH
#define MNEMO_LANG_OPS_POOLING_POOLINGKERNELS_CUH

#include "lang/ops/pooling/PoolingFormulas.h"

namespace mnemo::cuda {

using pooling::PoolShape;

template <bool IsMax, typename T>
__device__ void pool2d(const PoolShape &s, const T *x, T *y) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= s.nc * s.ho * s.wo)
    return;
  int64_t ow = e % s.wo, oh = (e / s.wo) % s.ho, p = e / (s.wo * s.ho);
  const T *plane = x + p * s.h * s.w;
  y[e] = st<T>(pooling::poolWindow<IsMax, float>(
      s, oh, ow, [plane](long long i) { return ld(plane[i]); }));
}

template <bool IsMax, typename T>
__device__ void pool2dGrad(const PoolShape &s, const T *dy, const T *x, T *dx) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= s.nc * s.h * s.w)
    return;
  int64_t iw = e % s.w, ih = (e / s.w) % s.h, p = e / (s.w * s.h);
  const T *g = dy + p * s.ho * s.wo;
  const T *plane = IsMax ? x + p * s.h * s.w : nullptr;
  float acc = 0;
  pooling::forEachWindowHolding(s, ih, iw, [&](long long oh, long long ow) {
    if (!IsMax)
      acc += ld(g[oh * s.wo + ow]) / float(s.kh * s.kw);
    else if (pooling::windowArgmax<float>(s, oh, ow, [plane](long long i) {
               return ld(plane[i]);
             }) == ih * s.w + iw)
      acc += ld(g[oh * s.wo + ow]);
  });
  dx[e] = st<T>(acc);
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_POOLING_POOLINGKERNELS_CUH
