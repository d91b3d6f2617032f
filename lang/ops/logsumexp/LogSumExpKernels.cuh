//===- LogSumExpKernels.cuh - logsumexp on the GPU -------------*- CUDA -*-===//
//
// The device functions the generated kernels call for mnemo.logsumexp, the
// CPU kernel's arithmetic (LogSumExpKernels.h) on the GPU. Included by the
// generated kernel source after runtime/cuda/Kernels.cuh, whose helpers
// (ld, blockMax, blockSum, fastExp) it uses; NVRTC is given it by name
// (runtime/cuda/MnemoCuda.cmake), so it includes nothing itself.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_LOGSUMEXP_LOGSUMEXPKERNELS_CUH
#define MNEMO_LANG_OPS_LOGSUMEXP_LOGSUMEXPKERNELS_CUH

namespace mnemo::cuda {

/// The row's result from its maximum (NaN if the row has one) and the sum
/// of exp(x - shift), shift being the maximum or 0 where that is infinite.
__device__ __forceinline__ float logSumExpOfRow(float m, float sum) {
  return isnan(m) ? m : logf(sum) + (isinf(m) ? 0.0f : m);
}

/// Contiguous rows of n (the reduced axis innermost): one block per row.
template <typename T>
__device__ void logSumExpRows(const T *x, T *y, int64_t rows, int64_t n) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xs = x + row * n;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      m = nanMax(m, ld(xs[j]));
    m = blockMax(m);
    float shift = isinf(m) ? 0.0f : m, sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      sum += fastExp(ld(xs[j]) - shift);
    sum = blockSum(sum);
    if (threadIdx.x == 0)
      y[row] = st<T>(logSumExpOfRow(m, sum));
  }
}

/// Along a non-innermost axis: one thread per (outer, inner) pair, reading
/// along the axis (neighbouring threads read neighbouring elements).
template <typename T>
__device__ void logSumExpStrided(const T *x, T *y, int64_t outer, int64_t n,
                                 int64_t inner) {
  int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= outer * inner)
    return;
  int64_t o = t / inner, i = t % inner;
  const T *xs = x + o * n * inner + i;
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j)
    m = nanMax(m, ld(xs[j * inner]));
  float shift = isinf(m) ? 0.0f : m, sum = 0;
  for (int64_t j = 0; j < n; ++j)
    sum += fastExp(ld(xs[j * inner]) - shift);
  y[t] = st<T>(logSumExpOfRow(m, sum));
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_LOGSUMEXP_LOGSUMEXPKERNELS_CUH
