//===- LossesKernels.cuh - Classification losses on the GPU ----*- CUDA -*-===//
//
// The device functions the generated kernels call for cross_entropy, its
// gradient and accuracy: one block per row, the rows' losses or hits then
// averaged in a fixed order by Kernels.cuh's meanOf. The terms are
// LossesFormulas.h's. Included by the generated kernel source after
// runtime/cuda/Kernels.cuh, whose helpers (ld, st, blockMax, blockSum,
// raiseError) it uses; NVRTC is given it and the formulas by name
// (runtime/cuda/MnemoCuda.cmake).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_CUH
#define MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_CUH

#include "lang/ops/losses/LossesFormulas.h"

namespace mnemo {
namespace cuda {

/// log(sum(exp(x))) of a row of n, by the whole block (max-shifted).
template <typename T> __device__ float rowLogSumExp(const T *xs, int64_t n) {
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    m = fmaxf(m, ld(xs[c]));
  m = blockMax(m);
  float sum = 0;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    sum += fastExp(ld(xs[c]) - m);
  return logf(blockSum(sum)) + m;
}

/// Cross-entropy, first pass: one block per row writes the row's loss
/// (log-sum-exp minus the target's logit) to `rowLoss`.
template <typename T>
__device__ void crossEntropyRows(const Regions &r, const T *logits,
                                 const int32_t *targets, int64_t rows,
                                 int64_t classes, float *rowLoss) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xs = logits + row * classes;
    int32_t t = targets[row];
    float logSum = rowLogSumExp(xs, classes);
    if (threadIdx.x == 0) {
      bool valid = t >= 0 && t < classes;
      if (!valid)
        raiseError(r, kTargetOutOfRange, t);
      rowLoss[row] = valid ? losses::crossEntropyTerm(logSum, ld(xs[t])) : 0.0f;
    }
  }
}

/// d logits = (softmax - onehot) * grad / rows: one block per row.
template <typename T>
__device__ void crossEntropyGrad(const Regions &r, const float *grad,
                                 const T *logits, const int32_t *targets,
                                 int64_t rows, int64_t classes, T *dlogits) {
  float scale = grad[0] / float(rows);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xs = logits + row * classes;
    T *out = dlogits + row * classes;
    int32_t t = targets[row];
    if (t < 0 || t >= classes) {
      if (threadIdx.x == 0)
        raiseError(r, kTargetOutOfRange, t);
      t = -1;
    }
    float logSum = rowLogSumExp(xs, classes);
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      out[c] = st<T>(
          losses::crossEntropyGradValue(ld(xs[c]), logSum, c == t, scale));
  }
}

/// Accuracy, first pass: one block per row writes 1 where the row's first
/// maximum is its target (into `hits`; meanOf averages them). As the CPU's
/// serial scan: NaNs never win, and a NaN in column 0 makes column 0 the
/// answer. Each thread finds the first maximum of its columns, and the
/// block combines them (larger value, then smaller column).
template <typename T>
__device__ void accuracyRows(const T *logits, const int32_t *targets,
                             int64_t rows, int64_t classes, float *hits) {
  __shared__ float values[1024];
  __shared__ int64_t columns[1024];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xs = logits + row * classes;
    float best = -INFINITY;
    int64_t at = -1;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      float v = ld(xs[c]);
      if (v == v && (at < 0 || v > best)) {
        best = v;
        at = c;
      }
    }
    __syncthreads(); // the previous row's values may still be read
    values[threadIdx.x] = best;
    columns[threadIdx.x] = at;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if (int(threadIdx.x) < half) {
        float v = values[threadIdx.x + half];
        int64_t c = columns[threadIdx.x + half];
        if (c >= 0 &&
            (columns[threadIdx.x] < 0 || v > values[threadIdx.x] ||
             (v == values[threadIdx.x] && c < columns[threadIdx.x]))) {
          values[threadIdx.x] = v;
          columns[threadIdx.x] = c;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      float first = ld(xs[0]);
      int64_t answer = first != first || columns[0] < 0 ? 0 : columns[0];
      hits[row] = answer == targets[row] ? 1.0f : 0.0f;
    }
  }
}

/// mse's first pass: each block's partial sum of (a - b)^2 over a
/// grid-stride range, the differences rounded to f32 as the CPU's are;
/// Kernels.cuh's finishSumOfSquares adds the blocks' sums in order.
template <typename T>
__device__ void squaredErrorPartial(const T *a, const T *b, int64_t n,
                                    float *partial) {
  float sum = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = ld(a[i]) - ld(b[i]);
    sum += v * v;
  }
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = sum;
}

} // namespace cuda
} // namespace mnemo

#endif // MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_CUH
