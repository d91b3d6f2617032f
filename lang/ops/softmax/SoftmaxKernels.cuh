//===- SoftmaxKernels.cuh - softmax on the GPU -----------------*- CUDA -*-===//
//
// The device functions the generated kernels call for softmax and
// log_softmax: one block per row when the axis is innermost, one thread
// per row otherwise; the elements by SoftmaxFormulas.h. Included by the
// generated kernel source after runtime/cuda/Kernels.cuh, whose helpers
// (ld, st, blockMax, blockSum) it uses; NVRTC is given it and the formulas
// by name (runtime/cuda/MnemoCuda.cmake).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_SOFTMAX_SOFTMAXKERNELS_CUH
#define MNEMO_LANG_OPS_SOFTMAX_SOFTMAXKERNELS_CUH

#include "lang/ops/softmax/SoftmaxFormulas.h"

namespace mnemo::cuda {

/// Softmax (or log-softmax) of contiguous rows of n: one block per row.
template <typename T>
__device__ void softmaxRows(const T *x, T *y, int64_t rows, int64_t n,
                            bool logarithm) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xs = x + row * n;
    T *ys = y + row * n;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      m = fmaxf(m, ld(xs[j]));
    m = blockMax(m);
    float sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      sum += softmax::shiftedExp(ld(xs[j]), m);
    sum = blockSum(sum);
    if (logarithm) {
      float logSum = logf(sum);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        ys[j] = st<T>(softmax::logSoftmaxValue(ld(xs[j]), m, logSum));
    } else {
      float inv = 1.0f / sum;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        ys[j] = st<T>(softmax::softmaxValue(ld(xs[j]), m, inv));
    }
  }
}

/// Softmax along a non-innermost axis: one thread per (outer, inner) pair,
/// reading along the axis (neighbouring threads read neighbouring inner
/// elements: coalesced).
template <typename T>
__device__ void softmaxStrided(const T *x, T *y, int64_t outer, int64_t n,
                               int64_t inner, bool logarithm) {
  int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= outer * inner)
    return;
  int64_t o = t / inner, in = t % inner;
  const T *xs = x + o * n * inner + in;
  T *ys = y + o * n * inner + in;
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j)
    m = fmaxf(m, ld(xs[j * inner]));
  float sum = 0;
  for (int64_t j = 0; j < n; ++j)
    sum += softmax::shiftedExp(ld(xs[j * inner]), m);
  float logSum = logf(sum), inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) {
    float v = ld(xs[j * inner]);
    ys[j * inner] = st<T>(logarithm ? softmax::logSoftmaxValue(v, m, logSum)
                                    : softmax::softmaxValue(v, m, inv));
  }
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_SOFTMAX_SOFTMAXKERNELS_CUH
