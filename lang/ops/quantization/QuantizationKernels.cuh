//===- QuantizationKernels.cuh - Quantization on the GPU -------*- CUDA -*-===//
//
// The device functions the generated kernels call for the quantization
// family: observers (a block per channel), fake quantization and
// dequantization (a grid over the elements), the activations' int8 codes
// (a block per row), the int8 product where cuBLASLt's kernels do not take
// the shape, the rescale after cuBLASLt's, and the CSR product (a block
// per output channel). The arithmetic is QuantizationFormulas.h's, as the
// CPU kernels'. Included by the generated kernel source after
// runtime/cuda/Kernels.cuh, whose helpers (blockMax, blockSum, raiseError)
// it uses; NVRTC is given it and the formulas by name
// (runtime/cuda/MnemoCuda.cmake).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONKERNELS_CUH
#define MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONKERNELS_CUH

#include "lang/ops/quantization/QuantizationFormulas.h"

namespace mnemo::cuda {

//===----------------------------------------------------------------------===//
// Quantization-aware training
//===----------------------------------------------------------------------===//

/// `observe_minmax`: block c folds channel c's range (elements
/// (o * channels + c) * inner + i) into the observed range.
__device__ void observeMinMax(int64_t n, int64_t channels, int64_t inner,
                              const float *x, const float *lo, const float *hi,
                              float *newLo, float *newHi, const int64_t *step,
                              float averaging) {
  int64_t c = blockIdx.x, outer = n / (channels * inner);
  float smallest = INFINITY, largest = -INFINITY;
  for (int64_t k = threadIdx.x; k < outer * inner; k += blockDim.x) {
    float v = x[((k / inner) * channels + c) * inner + k % inner];
    smallest = fminf(smallest, v);
    largest = fmaxf(largest, v);
  }
  smallest = -blockMax(-smallest);
  largest = blockMax(largest);
  if (threadIdx.x == 0) {
    bool first = *step <= 1;
    newLo[c] = fakequant::observe(lo[c], smallest, first, averaging, true);
    newHi[c] = fakequant::observe(hi[c], largest, first, averaging, false);
  }
}

/// `fake_quant`, or with `grad` its clipped straight-through gradient.
__device__ void fakeQuantize(int64_t n, int64_t channels, int64_t inner,
                             const float *x, const float *grad, const float *lo,
                             const float *hi, int qmin, int qmax,
                             bool symmetric, float *out) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t c = (e / inner) % channels;
    fakequant::QParams q =
        fakequant::qparams(lo[c], hi[c], qmin, qmax, symmetric);
    out[e] =
        grad ? (fakequant::passesGradient(x[e], q, qmin, qmax) ? grad[e] : 0.0f)
             : fakequant::fakeQuant(x[e], q, qmin, qmax);
  }
}

//===----------------------------------------------------------------------===//
// Quantized weights for inference
//===----------------------------------------------------------------------===//

/// `quantize_rows`: block m quantizes row m of x [rows, k].
__device__ void quantizeRows(int64_t k, const float *x, int8_t *codes,
                             float *scale, int32_t *sum) {
  __shared__ int total;
  int64_t m = blockIdx.x;
  const float *row = x + m * k;
  float absMax = 0.0f;
  for (int64_t c = threadIdx.x; c < k; c += blockDim.x) // NaN: see rowCode
    absMax = fmaxf(absMax, isnan(row[c]) ? INFINITY : fabsf(row[c]));
  absMax = blockMax(absMax);
  if (threadIdx.x == 0)
    total = 0;
  __syncthreads();
  float rowScale = fakequant::rowScale(absMax), inverse = 1.0f / rowScale;
  int partial = 0;
  for (int64_t c = threadIdx.x; c < k; c += blockDim.x) {
    int code = fakequant::rowCode(row[c], inverse);
    codes[m * k + c] = int8_t(code);
    partial += code;
  }
  atomicAdd(&total, partial);
  __syncthreads();
  if (threadIdx.x == 0) {
    scale[m] = rowScale;
    sum[m] = total;
  }
}

/// `matmul_int8` where cuBLASLt's int8 kernels do not take the shape (N or
/// K not a multiple of 8, few rows: a classifier's last layer): thread
/// (m, n) sums the int8 products of its row and channel in int32, four at
/// a time with __dp4a when K allows, and rescales them.
__device__ void matmulInt8Small(int64_t rows, int64_t n, int64_t k,
                                const int8_t *x, const float *xScale,
                                const int32_t *xSum, const int8_t *w,
                                const float *wScale, const int32_t *wZeroPoint,
                                float *out) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t m = e / n, j = e % n;
    const int8_t *a = x + m * k, *b = w + j * k;
    int acc = 0;
    if (k % 4 == 0) {
      const int *a4 = reinterpret_cast<const int *>(a);
      const int *b4 = reinterpret_cast<const int *>(b);
      for (int64_t c = 0; c < k / 4; ++c)
        acc = __dp4a(a4[c], b4[c], acc);
    } else {
      for (int64_t c = 0; c < k; ++c)
        acc += int(a[c]) * int(b[c]);
    }
    out[e] = fakequant::int8Rescale(acc, wZeroPoint[j], xSum[m], xScale[m],
                                    wScale[j]);
  }
}

/// `matmul_int8`'s epilogue, in place: cuBLASLt's int32 products `acc`
/// [rows, n] become f32 in the same buffer.
__device__ void int8Rescale(int64_t rows, int64_t n, const int32_t *acc,
                            const float *xScale, const int32_t *xSum,
                            const float *wScale, const int32_t *wZeroPoint,
                            float *out) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t m = e / n, j = e % n;
    int value = acc[e];
    out[e] = fakequant::int8Rescale(value, wZeroPoint[j], xSum[m], xScale[m],
                                    wScale[j]);
  }
}

/// `dequantize`: n elements in `channels` equal runs; bits 8 or 4.
__device__ void dequantize(int64_t n, int64_t channels, int bits,
                           const int8_t *codes, const float *scale,
                           const int32_t *zeroPoint, float *out) {
  int64_t inner = n / channels;
  const signed char *packed = reinterpret_cast<const signed char *>(codes);
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int code = bits == 8 ? int(codes[e]) : fakequant::int4Code(packed, e);
    out[e] =
        fakequant::dequantized(code, zeroPoint[e / inner], scale[e / inner]);
  }
}

/// `matmul_csr`: block j computes column j of out [rows, n] from row j of
/// the CSR weight; offsets and columns out of range raise an error.
__device__ void matmulCsr(const Regions &r, int64_t rows, int64_t n, int64_t k,
                          int64_t capacity, const float *x, const float *values,
                          const int16_t *columns16, const int32_t *columns32,
                          const int32_t *rowOffsets, float *out) {
  int64_t j = blockIdx.x;
  int64_t begin = rowOffsets[j], end = rowOffsets[j + 1];
  if (begin < 0 || begin > end || end > capacity) {
    if (threadIdx.x == 0)
      raiseError(r, kSparseIndexOutOfRange, j);
    return;
  }
  for (int64_t m = threadIdx.x; m < rows; m += blockDim.x) {
    const float *row = x + m * k;
    float total = 0.0f;
    for (int64_t e = begin; e < end; ++e) {
      int64_t c = columns16 ? int64_t(columns16[e]) : int64_t(columns32[e]);
      if (c < 0 || c >= k) {
        raiseError(r, kSparseIndexOutOfRange, j);
        return;
      }
      total += row[c] * values[e];
    }
    out[m * n + j] = total;
  }
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONKERNELS_CUH
