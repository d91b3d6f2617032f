//===- NormalizationKernels.cuh - Layer norms on the GPU -------*- CUDA -*-===//
//
// The device functions the generated kernels call for the normalization
// family: one block per row for the forward and the input's gradient, and
// the scale and bias gradients as column sums over row chunks, added in
// chunk order (deterministic). The per-element arithmetic is
// NormalizationFormulas.h's. Included by the generated kernel source after
// runtime/cuda/Kernels.cuh, whose helpers (ld, st, blockSum) it uses; NVRTC
// is given it and the formulas by name (runtime/cuda/MnemoCuda.cmake).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONKERNELS_CUH
#define MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONKERNELS_CUH

#include "lang/ops/normalization/NormalizationFormulas.h"

namespace mnemo::cuda {

/// A row's mean (0 for RMS norm) and reciprocal deviation: two passes over
/// the row, the second over deviations (no cancellation).
template <typename T>
__device__ void layerNormRowStatistics(const T *row, int64_t d, float eps,
                                       bool rms, float &mu, float &rstd) {
  float sum = 0;
  if (!rms) {
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      sum += ld(row[j]);
    sum = blockSum(sum);
  }
  mu = rms ? 0.0f : sum / float(d);
  float var = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float c = ld(row[j]) - mu;
    var += c * c;
  }
  var = blockSum(var) / float(d);
  rstd = rsqrtf(var + eps);
}

/// Layer norm (RMS norm without bias when rms): one block per row.
template <typename T>
__device__ void layerNorm(const T *x, const T *scale, const T *bias, T *y,
                          int64_t rows, int64_t d, float eps, bool rms) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = x + r * d;
    float mu, rstd;
    layerNormRowStatistics(row, d, eps, rms, mu, rstd);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      y[r * d + j] = st<T>(normalization::normalize(
          ld(row[j]), mu, rstd, ld(scale[j]), bias ? ld(bias[j]) : 0.0f));
  }
}

/// The input gradient of layer norm, one block per row; each row's mean
/// and reciprocal deviation go to `stats` (2 floats per row) for the
/// parameter gradients' kernel.
template <typename T>
__device__ void layerNormGradRows(const T *dy, const T *x, const T *scale,
                                  T *dx, float *stats, int64_t rows, int64_t d,
                                  float eps, bool rms) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = x + r * d, *g = dy + r * d;
    float mu, rstd;
    layerNormRowStatistics(row, d, eps, rms, mu, rstd);
    float meanDxhat = 0, meanDxhatXhat = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float dxhat = ld(g[j]) * ld(scale[j]);
      meanDxhat += dxhat;
      meanDxhatXhat += dxhat * normalization::normalized(ld(row[j]), mu, rstd);
    }
    meanDxhat = blockSum(meanDxhat) / float(d);
    meanDxhatXhat = blockSum(meanDxhatXhat) / float(d);
    float a = rms ? 0.0f : meanDxhat;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      dx[r * d + j] = st<T>(normalization::normalizeInputGrad(
          ld(g[j]), ld(row[j]), ld(scale[j]), mu, rstd, a, meanDxhatXhat));
    if (threadIdx.x == 0) {
      stats[2 * r] = mu;
      stats[2 * r + 1] = rstd;
    }
  }
}

/// The scale and bias gradients, first pass: grid (column blocks, row
/// chunks); each thread sums one column over one chunk of rows into
/// `partial` ([chunks][2][d]).
template <typename T>
__device__ void layerNormGradColumns(const T *dy, const T *x,
                                     const float *stats, float *partial,
                                     int64_t rows, int64_t d) {
  int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d)
    return;
  int64_t chunks = gridDim.y, chunk = blockIdx.y;
  int64_t r0 = rows * chunk / chunks, r1 = rows * (chunk + 1) / chunks;
  float ds = 0, db = 0;
  for (int64_t r = r0; r < r1; ++r) {
    float g = ld(dy[r * d + j]);
    ds += g * normalization::normalized(ld(x[r * d + j]), stats[2 * r],
                                        stats[2 * r + 1]);
    db += g;
  }
  partial[(chunk * 2) * d + j] = ds;
  partial[(chunk * 2 + 1) * d + j] = db;
}

/// Second pass: the chunks' sums in chunk order (deterministic).
template <typename T>
__device__ void layerNormGradFinish(const float *partial, int64_t chunks,
                                    int64_t d, T *dscale, T *dbias) {
  int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d)
    return;
  float ds = 0, db = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    ds += partial[(c * 2) * d + j];
    db += partial[(c * 2 + 1) * d + j];
  }
  dscale[j] = st<T>(ds);
  if (dbias)
    dbias[j] = st<T>(db);
}

// The batch-norm kernels below take the data (x, y and their gradients) in
// T and the scale, bias and their gradients in P: f32 parameters beside
// 16-bit data under mixed precision, as PyTorch's and cuDNN's batch norm.
// The statistics are f32.

/// Batch normalization of x [n, c, inner]: one block per channel, its mean
/// and biased variance (two passes, the second over deviations) into
/// `mean` and `var`, then y.
template <typename T, typename P>
__device__ void batchNorm(const T *x, const P *scale, const P *bias, T *y,
                          float *mean, float *var, int64_t n, int64_t c,
                          int64_t inner, float eps) {
  int64_t count = n * inner;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    float sum = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x)
      sum += ld(x[((k / inner) * c + ch) * inner + k % inner]);
    float mu = blockSum(sum) / float(count);
    float squares = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      float d = ld(x[((k / inner) * c + ch) * inner + k % inner]) - mu;
      squares += d * d;
    }
    float v = blockSum(squares) / float(count);
    float rstd = rsqrtf(v + eps);
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      int64_t at = ((k / inner) * c + ch) * inner + k % inner;
      y[at] = st<T>(normalization::normalize(ld(x[at]), mu, rstd, ld(scale[ch]),
                                             ld(bias[ch])));
    }
    if (threadIdx.x == 0) {
      mean[ch] = mu;
      var[ch] = v;
    }
  }
}

/// batch_norm_apply: y from the mean and variance batchNorm returned,
/// grid-stride over the elements; the same arithmetic as batchNorm's, so
/// the same bits.
template <typename T, typename P>
__device__ void batchNormApply(const T *x, const P *scale, const P *bias,
                               const float *mean, const float *var, T *y,
                               int64_t n, int64_t c, int64_t inner, float eps) {
  for (int64_t at = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       at < n * c * inner; at += int64_t(gridDim.x) * blockDim.x) {
    int64_t ch = (at / inner) % c;
    y[at] = st<T>(normalization::normalize(ld(x[at]), mean[ch],
                                           rsqrtf(var[ch] + eps), ld(scale[ch]),
                                           ld(bias[ch])));
  }
}

/// The gradients of batch normalization: one block per channel, from the
/// forward's statistics.
template <typename T, typename P>
__device__ void batchNormGrad(const T *dy, const T *x, const P *scale,
                              const float *mean, const float *var, T *dx,
                              P *dscale, P *dbias, int64_t n, int64_t c,
                              int64_t inner, float eps) {
  int64_t count = n * inner;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    float mu = mean[ch], rstd = rsqrtf(var[ch] + eps);
    float sumDy = 0, sumDyXhat = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      int64_t at = ((k / inner) * c + ch) * inner + k % inner;
      float g = ld(dy[at]);
      sumDy += g;
      sumDyXhat += g * normalization::normalized(ld(x[at]), mu, rstd);
    }
    sumDy = blockSum(sumDy);
    sumDyXhat = blockSum(sumDyXhat);
    float s = ld(scale[ch]);
    float a = sumDy * s / float(count), b = sumDyXhat * s / float(count);
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      int64_t at = ((k / inner) * c + ch) * inner + k % inner;
      dx[at] = st<T>(normalization::normalizeInputGrad(ld(dy[at]), ld(x[at]), s,
                                                       mu, rstd, a, b));
    }
    if (threadIdx.x == 0) {
      dscale[ch] = st<P>(sumDyXhat);
      dbias[ch] = st<P>(sumDy);
    }
  }
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONKERNELS_CUH
