//===- LossesKernels.cuh - Classification losses on the GPU ----*- CUDA -*-===//
//
// The device functions the generated kernels call for cross_entropy, its
// gradient, the fused linear_cross_entropy's rows (the products are
// cuBLASLt's, chunk by chunk) and accuracy: one block per row, the rows' losses
// or hits then averaged over the rows that count (targets not ignore_index) in
// a fixed order by countedMeanOf. The terms are LossesFormulas.h's. Included by
// the generated kernel source after runtime/cuda/Kernels.cuh, whose helpers
// (ld, st, blockMax, blockSum, raiseError) it uses; NVRTC is given it and the
// formulas by name (runtime/cuda/MnemoCuda.cmake).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_CUH
#define MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_CUH

#include "lang/ops/losses/LossesFormulas.h"

namespace mnemo::cuda {

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
/// (LossesFormulas.h's term) to `rowLoss` and 1 to `counted` if its target
/// is not ignore_index (0 and 0 if it is), and with `logSumExp` the row's
/// log-sum-exp (linear_cross_entropy keeps it for the backward).
template <typename T>
__device__ void crossEntropyRows(const Regions &r, const T *logits,
                                 const int32_t *targets, int64_t rows,
                                 int64_t classes, int64_t ignoreIndex,
                                 double smoothing, float *rowLoss,
                                 float *counted, float *logSumExp = nullptr) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xs = logits + row * classes;
    int32_t t = targets[row];
    bool counts = losses::countsTowardLoss(t, ignoreIndex);
    float logSum = rowLogSumExp(xs, classes);
    float sum = 0;
    if (smoothing != 0) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        sum += ld(xs[c]);
      sum = blockSum(sum);
    }
    if (threadIdx.x == 0) {
      bool valid = !counts || (t >= 0 && t < classes);
      if (!valid)
        raiseError(r, kTargetOutOfRange, t);
      rowLoss[row] =
          counts && valid
              ? losses::crossEntropyTerm(logSum, ld(xs[t]), sum, float(classes),
                                         float(smoothing))
              : 0.0f;
      counted[row] = counts ? 1.0f : 0.0f;
      if (logSumExp)
        logSumExp[row] = logSum;
    }
  }
}

/// The rows whose target is not ignore_index, by one block, into *out.
__device__ void countRows(const int32_t *targets, int64_t rows,
                          int64_t ignoreIndex, float *out) {
  float counted = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x)
    counted += losses::countsTowardLoss(targets[i], ignoreIndex) ? 1.0f : 0.0f;
  counted = blockSum(counted);
  if (threadIdx.x == 0)
    *out = counted;
}

/// The second pass: the values' sum over the counted rows' number (NaN if
/// none, as PyTorch's 0 / 0), each summed by one block in a fixed order.
__device__ void countedMeanOf(const float *values, const float *counted,
                              int64_t n, float *out) {
  float sum = 0, count = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sum += values[i];
    count += counted[i];
  }
  sum = blockSum(sum);
  count = blockSum(count); // exact: fewer than 2^24 rows
  if (threadIdx.x == 0)
    *out = sum / count;
}

/// d logits = (softmax - (1 - e) onehot - e / C) * grad / counted: one
/// block per row, zeros where the row is ignored.
template <typename T>
__device__ void crossEntropyGrad(const Regions &r, const float *grad,
                                 const T *logits, const int32_t *targets,
                                 int64_t rows, int64_t classes,
                                 int64_t ignoreIndex, double smoothing,
                                 const float *counted, T *dlogits) {
  float scale = grad[0] / *counted;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xs = logits + row * classes;
    T *out = dlogits + row * classes;
    int32_t t = targets[row];
    if (!losses::countsTowardLoss(t, ignoreIndex)) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        out[c] = st<T>(0.0f);
      continue;
    }
    if (t < 0 || t >= classes) {
      if (threadIdx.x == 0)
        raiseError(r, kTargetOutOfRange, t);
      t = -1;
    }
    float logSum = rowLogSumExp(xs, classes);
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      out[c] = st<T>(losses::crossEntropyGradValue(
          ld(xs[c]), logSum, c == t, scale, float(classes), float(smoothing)));
  }
}

/// linear_cross_entropy, per chunk of `chunkRows` rows (chunk r.index, of
/// which `rows` are here), after cuBLASLt wrote the chunk's logits: each
/// row's loss, count and log-sum-exp at its place among all the rows. A
/// bias (null: none) is first added to the block's rows, in the logits'
/// type as an unfused add would.
template <typename T>
__device__ void
classifierRows(const Regions &r, T *logits, const T *bias,
               const int32_t *targets, int64_t chunkRows, int64_t rows,
               int64_t classes, int64_t ignoreIndex, double smoothing,
               float *rowLoss, float *counted, float *logSumExp) {
  int64_t first = r.index * chunkRows;
  if (bias) {
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        logits[row * classes + c] =
            st<T>(ld(logits[row * classes + c]) + ld(bias[c]));
    __syncthreads(); // a row's threads read each other's columns next
  }
  crossEntropyRows(r, logits, targets + first, rows, classes, ignoreIndex,
                   smoothing, rowLoss + first, counted + first,
                   logSumExp + first);
}

/// linear_cross_entropy's gradient, per chunk: the chunk's logits turned
/// into their gradient in place, from the saved log-sum-exp (one block per
/// row; an ignored row's gradient is zero).
template <typename T>
__device__ void
classifierGradRows(const Regions &r, const float *grad, T *logits,
                   const T *bias, const int32_t *targets,
                   const float *logSumExp, int64_t chunkRows, int64_t rows,
                   int64_t classes, int64_t ignoreIndex, double smoothing,
                   const float *counted) {
  int64_t first = r.index * chunkRows;
  float scale = grad[0] / *counted;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    T *xs = logits + row * classes;
    int32_t t = targets[first + row];
    bool counts = losses::countsTowardLoss(t, ignoreIndex);
    float logSum = logSumExp[first + row];
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      // The logit as the forward saw it: the bias added in T.
      float x = bias ? ld(st<T>(ld(xs[c]) + ld(bias[c]))) : ld(xs[c]);
      xs[c] = st<T>(counts ? losses::crossEntropyGradValue(
                                 x, logSum, c == t, scale, float(classes),
                                 float(smoothing))
                           : 0.0f);
    }
  }
}

/// The bias's gradient: a chunk's logit gradients [rows, classes] summed
/// over its rows (in double, in row order) and added to `sums`, one thread
/// per class, so the order is fixed.
template <typename T>
__device__ void addColumnSums(const T *dlogits, int64_t rows, int64_t classes,
                              float *sums) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < classes;
       c += int64_t(gridDim.x) * blockDim.x) {
    double sum = 0;
    for (int64_t row = 0; row < rows; ++row)
      sum += ld(dlogits[row * classes + c]);
    sums[c] = float(double(sums[c]) + sum);
  }
}

/// f32 sums narrowed into 16-bit storage (a weight gradient summed over
/// the chunks in f32), grid-stride.
template <typename T>
__device__ void narrowSums(const float *sums, int64_t n, T *out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = st<T>(sums[i]);
}

/// Accuracy, first pass: one block per row writes 1 where the row's first
/// maximum is its target (into `hits`) and whether its target counts
/// (countedMeanOf averages the hits over the counted rows). As the CPU's
/// serial scan: NaNs never win, and a NaN in column 0 makes column 0 the
/// answer. Each thread finds the first maximum of its columns, and the
/// block combines them (larger value, then smaller column).
template <typename T>
__device__ void accuracyRows(const T *logits, const int32_t *targets,
                             int64_t rows, int64_t classes, int64_t ignoreIndex,
                             float *hits, float *counted) {
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
      bool counts = losses::countsTowardLoss(targets[row], ignoreIndex);
      hits[row] = counts && answer == targets[row] ? 1.0f : 0.0f;
      counted[row] = counts ? 1.0f : 0.0f;
    }
  }
}

/// linear_cross_entropy's accuracy, per chunk (chunk r.index, of which
/// `rows` are here), after classifierRows added the bias: accuracyRows on
/// the chunk's logits, each row's hit and count at its place among all the
/// rows.
template <typename T>
__device__ void
classifierHits(const Regions &r, const T *logits, const int32_t *targets,
               int64_t chunkRows, int64_t rows, int64_t classes,
               int64_t ignoreIndex, float *hits, float *counted) {
  int64_t first = r.index * chunkRows;
  accuracyRows(logits, targets + first, rows, classes, ignoreIndex,
               hits + first, counted + first);
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

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_LOSSES_LOSSESKERNELS_CUH
