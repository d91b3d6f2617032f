//===- Kernels.cuh - The CUDA kernels' device library ----------*- CUDA -*-===//
//
// Compiled at the trainer's start-up by NVRTC together with the kernels
// mnemoc generates for one model (which #include this file): every generated
// kernel is a thin __global__ function that calls one of these device
// functions with its shapes and offsets as constants, or evaluates a fused
// elementwise tree inline.
//
// Conventions:
// - Storage may be f32, bf16 or f16 (T); arithmetic and every accumulation
//   is f32 (ld/st convert).
// - Row operations (softmax, norms, cross-entropy) run one block per row
//   and reduce with warp shuffles, then across warps through shared memory.
// - Sums are deterministic (fixed partitions, summed in a fixed order);
//   the one exception is the embedding gradient's scatter-add (atomicAdd),
//   as in PyTorch's default.
// - Kernels never fail: an index out of range sets control[kErrorFlag] and
//   the trainer reports it after the step.
// - The elementwise formulas (fastExp, gelu, dropoutUniform, ...) are the
//   CPU backend's: both include lang/ops/elementwise/ElementwiseFormulas.h,
//   so the two backends compute the same function.
//
// Device code only, no host headers: NVRTC compiles it without a C++
// standard library.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_CUDA_KERNELS_CUH
#define MNEMO_RUNTIME_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "lang/ops/elementwise/ElementwiseFormulas.h"
#include "runtime/AdamRules.h"
#include "runtime/Quantize8Codes.h"

// NVRTC has no <cmath>: the macros the emitter's literals use.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
// Compiled as host C++ by the test suite's CUDA emulator
// (test/cuda-emulator/), which runs the kernels on the CPU.
#include <cstdint>
#endif

namespace mnemo {
namespace cuda {

/// The generated code's names for the 16-bit float types (the CPU backend
/// has its own, runtime/cpu/Half.h).
typedef __nv_bfloat16 bf16_t;
typedef __half f16_t;

/// The plan's regions on the device; every generated kernel takes this one
/// argument and addresses everything at constant offsets from it.
struct Regions {
  uint8_t *A; // arena
  uint8_t *P; // parameters
  uint8_t *G; // gradients
  uint8_t *S; // optimizer state
  uint8_t *I; // the batch
  uint8_t *W; // workspace (cuBLASLt, cuDNN, and the kernels' partial sums)
  int64_t *control;
};

/// Slots of the control block (int64 each).
enum ControlSlot { kDropoutStep = 0, kErrorFlag = 1, kErrorValue = 2 };
enum ErrorCode {
  kTargetOutOfRange = 1,
  kIndexOutOfRange = 2,
  kSparseIndexOutOfRange = 3
};

__device__ __forceinline__ void raiseError(const Regions &r, int code,
                                           int64_t value) {
  if (atomicCAS(reinterpret_cast<unsigned long long *>(&r.control[kErrorFlag]),
                0ull, (unsigned long long)code) == 0ull)
    r.control[kErrorValue] = value;
}

__device__ __forceinline__ float *f32(uint8_t *p) {
  return reinterpret_cast<float *>(p);
}
__device__ __forceinline__ __nv_bfloat16 *bf16(uint8_t *p) {
  return reinterpret_cast<__nv_bfloat16 *>(p);
}
__device__ __forceinline__ __half *f16(uint8_t *p) {
  return reinterpret_cast<__half *>(p);
}
__device__ __forceinline__ int64_t *i64(uint8_t *p) {
  return reinterpret_cast<int64_t *>(p);
}
__device__ __forceinline__ int32_t *i32(uint8_t *p) {
  return reinterpret_cast<int32_t *>(p);
}
__device__ __forceinline__ int16_t *i16(uint8_t *p) {
  return reinterpret_cast<int16_t *>(p);
}
__device__ __forceinline__ int8_t *i8(uint8_t *p) {
  return reinterpret_cast<int8_t *>(p);
}
__device__ __forceinline__ uint8_t *u8(uint8_t *p) { return p; }

__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ float ld(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float ld(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T st(float x);
template <> __device__ __forceinline__ float st<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 st<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half st<__half>(float x) {
  return __float2half_rn(x);
}

//===----------------------------------------------------------------------===//
// Elementwise math
//===----------------------------------------------------------------------===//

// The elementwise formulas (fastExp and every op's) are
// lang/ops/elementwise/ElementwiseFormulas.h's, the CPU backend's too;
// generated kernels call them as mnemo::elementwise::NAME(...).
using elementwise::fastExp;

/// PyTorch's NaN semantics, as the CPU kernels (runtime/cpu/Kernels.h):
/// every max propagates a NaN (fmaxf drops one), as relu does.
__device__ __forceinline__ float nanMax(float a, float b) {
  return a > b || isnan(a) ? a : b;
}

//===----------------------------------------------------------------------===//
// Reductions within a warp and a block
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = nanMax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// The block's sum (or maximum) of v, returned to every thread. Blocks have
/// a multiple of 32 threads, at most 1024.
template <bool IsMax> __device__ float blockReduce(float v) {
  __shared__ float partial[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int warps = (blockDim.x + 31) >> 5;
  v = IsMax ? warpMax(v) : warpSum(v);
  __syncthreads(); // partial[] may still be read by a previous call
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  float identity = IsMax ? -INFINITY : 0.0f;
  v = lane < warps ? partial[lane] : identity;
  return IsMax ? warpMax(v) : warpSum(v);
}
__device__ __forceinline__ float blockSum(float v) {
  return blockReduce<false>(v);
}
__device__ __forceinline__ float blockMax(float v) {
  return blockReduce<true>(v);
}

//===----------------------------------------------------------------------===//
// Softmax, normalization, losses
//===----------------------------------------------------------------------===//

/// The mean of n floats by one block, in a fixed order: for losses and
/// accuracy over rows (at most a few thousand values).
__device__ void meanOf(const float *values, int64_t n, float *out) {
  float sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    sum += values[i];
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    *out = sum / float(n);
}

/// Sums of squares in fixed chunks, first pass: block b of the grid sums
/// its share of the elements into partial[b]. Used by mse and the global
/// gradient norm, over a list of tensors.
struct TensorRef {
  int region; // 0 arena, 1 parameters, 2 gradients, 3 optimizer state
  int64_t offset, count;
};
__device__ __forceinline__ uint8_t *regionBase(const Regions &r, int region) {
  switch (region) {
  case 0:
    return r.A;
  case 1:
    return r.P;
  case 2:
    return r.G;
  case 3:
    return r.S;
  case 4:
    return r.I;
  default:
    return r.W;
  }
}

template <typename T>
__device__ void sumOfSquaresPartial(const Regions &r, const TensorRef *tensors,
                                    int count, float *partial) {
  float sum = 0;
  for (int t = 0; t < count; ++t) {
    const T *x = reinterpret_cast<const T *>(regionBase(r, tensors[t].region) +
                                             tensors[t].offset);
    int64_t n = tensors[t].count;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
      float v = ld(x[i]);
      sum += v * v;
    }
  }
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = sum;
}

/// Second pass: one block sums the partials; the result is scaled (by 1/n
/// for mse, lang/ops/losses) and optionally square-rooted (for the norm).
__device__ void finishSumOfSquares(const float *partial, int count, float scale,
                                   bool root, float *out) {
  float sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x)
    sum += partial[i];
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    *out = root ? sqrtf(sum * scale) : sum * scale;
}

//===----------------------------------------------------------------------===//
// The optimizer
//===----------------------------------------------------------------------===//

/// The learning rate of this step, on the device (one thread).
__device__ void lrSchedule(bool cosine, const int64_t *step,
                           const int64_t *totalSteps, double baseLr,
                           int64_t warmup, int64_t steps, double minLr,
                           float *out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) // one thread: it may read what
    return;                                // it writes (the loss scale)
  double total = steps > 0 ? double(steps) : double(*totalSteps);
  double s = double(*step), lr = baseLr;
  if (warmup > 0 && s <= double(warmup)) {
    lr = baseLr * s / double(warmup);
  } else if (cosine) {
    double progress = (s - double(warmup)) / fmax(1.0, total - double(warmup));
    progress = fmin(1.0, fmax(0.0, progress));
    lr = minLr + (baseLr - minLr) * 0.5 *
                     (1.0 + cos(3.14159265358979323846 * progress));
  }
  *out = float(lr);
}

/// torch.cuda.amp.GradScaler.update (one thread): the scale and the count
/// of finite steps stay on the device.
__device__ void lossScaleUpdate(const float *norm, const float *scale,
                                const float *count, float *newScale,
                                float *newCount, float *skip,
                                double growthFactor, double backoffFactor,
                                int64_t growthInterval) {
  if (threadIdx.x != 0 || blockIdx.x != 0) // one thread: it may read what
    return;                                // it writes (the loss scale)
  bool finite = isfinite(*norm);
  float next = finite ? *count + 1.0f : 0.0f;
  float nextScale = finite ? *scale : float(*scale * backoffFactor);
  if (finite && next >= float(growthInterval)) {
    nextScale = float(*scale * growthFactor);
    next = 0.0f;
  }
  *newScale = nextScale;
  *newCount = next;
  *skip = finite ? 0.0f : 1.0f;
}

__device__ void clipCoefficient(const float *norm, double maxNorm, float *out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) // one thread: it may read what
    return;                                // it writes (the loss scale)
  *out = fminf(float(maxNorm) / (*norm + 1e-6f), 1.0f);
}

/// One tensor of a multi-tensor Adam(W) update: where its parameter,
/// gradient, moments and their updated copies live, and where its elements
/// start in the flattened launch.
struct AdamTensor {
  TensorRef param, grad, expAvg, expAvgSq, newParam, newExpAvg, newExpAvgSq;
  int64_t first;
};

/// Every parameter of the group in one launch (a grid-stride loop over the
/// concatenated elements), torch.optim.AdamW's arithmetic in f32. `clip`
/// (or null): clip_grad_norm's coefficient, which scales each gradient as
/// it is read (CudaEmitter folds the multiplies into this launch).
template <typename T>
__device__ void
adamMultiTensor(const Regions &r, const AdamTensor *tensors, int count,
                int64_t total, const float *lrPtr, const int64_t *stepPtr,
                double beta1, double beta2, double eps, double weightDecay,
                bool decoupled, const float *skip, const float *clip) {
  __shared__ adam::Scalars shared;
  if (threadIdx.x == 0)
    shared = adam::scalars(double(*lrPtr), double(*stepPtr), beta1, beta2, eps,
                           weightDecay);
  __syncthreads();
  const adam::Scalars s = shared;
  // An overflowed f16 step (loss scaling) leaves everything as it is; the
  // updates are written in place, so there is nothing to copy.
  if (skip && *skip != 0.0f)
    return;
  int t = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    while (t + 1 < count && i >= tensors[t + 1].first)
      ++t;
    while (t > 0 && i < tensors[t].first)
      --t;
    const AdamTensor &a = tensors[t];
    int64_t k = i - a.first;
    auto at = [&](const TensorRef &ref) {
      return reinterpret_cast<T *>(regionBase(r, ref.region) + ref.offset) + k;
    };
    float p = ld(*at(a.param)), g = ld(*at(a.grad));
    // Gradient clipping folded in: the scaled gradient as the separate
    // multiply would have stored it.
    if (clip)
      g = ld(st<T>(g * *clip));
    float m = ld(*at(a.expAvg)), v = ld(*at(a.expAvgSq));
    adam::update(s, decoupled, p, g, m, v);
    *at(a.newParam) = st<T>(p);
    *at(a.newExpAvg) = st<T>(m);
    *at(a.newExpAvgSq) = st<T>(v);
  }
}

template <typename T>
__device__ void sgdUpdate(int64_t n, const T *param, const T *grad,
                          const T *buffer, T *newParam, T *newBuffer,
                          const float *lrPtr, const int64_t *stepPtr,
                          double momentum, double dampening, double weightDecay,
                          bool nesterov) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float lr = *lrPtr;
  int64_t step = *stepPtr;
  float mu = float(momentum), damp = float(1.0 - dampening),
        wd = float(weightDecay);
  float p = ld(param[i]), g = ld(grad[i]);
  float d = wd != 0.0f ? g + wd * p : g;
  if (mu != 0.0f) {
    float b = step <= 1 ? d : mu * ld(buffer[i]) + damp * d;
    newBuffer[i] = st<T>(b);
    d = nesterov ? d + mu * b : b;
  } else if (newBuffer != buffer) {
    newBuffer[i] = buffer[i];
  }
  newParam[i] = st<T>(p - lr * d);
}

/// adamw8bit (runtime/Quantize8.h): one CUDA block per quantization block
/// of at most kMaxQuantBlock elements. The block dequantizes, updates in
/// f32, reduces the new maxima, and encodes each moment to its nearest code
/// (a binary search over the codes sorted by value, built in shared memory
/// as the CPU builds its table).
constexpr int kMaxQuantBlock = 4096;
/// Quantization block b of one tensor (the thread block's share).
__device__ void
adam8bitBlock(int64_t b, int64_t n, int64_t blockSize, const float *param,
              const float *grad, const uint8_t *mCodes, const float *mMax,
              const uint8_t *vCodes, const float *vMax, float *newParam,
              uint8_t *newMCodes, float *newMMax, uint8_t *newVCodes,
              float *newVMax, const float *lrPtr, const int64_t *stepPtr,
              double beta1, double beta2, double eps, double weightDecay,
              const float *skip, const float *clip) {
  __shared__ float moments[2 * kMaxQuantBlock];
  __shared__ float value[2][256], sorted[2][256];
  __shared__ uint8_t sortedCode[2][256];
  __syncthreads(); // the previous block's tables may still be read
  int64_t begin = b * blockSize;
  int64_t end = begin + blockSize < n ? begin + blockSize : n;
  if (skip && *skip != 0.0f) {
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      newParam[i] = param[i];
      newMCodes[i] = mCodes[i];
      newVCodes[i] = vCodes[i];
    }
    if (threadIdx.x == 0) {
      newMMax[b] = mMax[b];
      newVMax[b] = vMax[b];
    }
    return;
  }
  for (int c = threadIdx.x; c < 256; c += blockDim.x) {
    value[0][c] = quant8::decodeCode(unsigned(c), true);
    value[1][c] = quant8::decodeCode(unsigned(c), false);
  }
  __syncthreads();
  // Rank each code by (value, code); signed 0x80 (-0) is left out.
  for (int c = threadIdx.x; c < 256; c += blockDim.x)
    for (int map = 0; map < 2; ++map) {
      if (map == 0 && c == 0x80)
        continue;
      int rank = 0;
      for (int d = 0; d < 256; ++d) {
        if (map == 0 && d == 0x80)
          continue;
        float vd = value[map][d], vc = value[map][c];
        rank += vd < vc || (vd == vc && d < c);
      }
      sorted[map][rank] = value[map][c];
      sortedCode[map][rank] = uint8_t(c);
    }
  float lr = *lrPtr;
  int64_t step = *stepPtr;
  const adam::Scalars s =
      adam::scalars(double(lr), double(step), beta1, beta2, eps, weightDecay);
  float mLargest = 0.0f, vLargest = 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float g = clip ? grad[i] * *clip : grad[i];
    float m = value[0][mCodes[i]] * mMax[b];
    float v = value[1][vCodes[i]] * vMax[b];
    float p = param[i];
    adam::update(s, /*decoupled=*/true, p, g, m, v);
    newParam[i] = p;
    moments[i - begin] = m;
    moments[kMaxQuantBlock + (i - begin)] = v;
    mLargest = fmaxf(mLargest, fabsf(m));
    vLargest = fmaxf(vLargest, v);
  }
  __syncthreads(); // the tables, before the searches below
  mLargest = blockMax(mLargest);
  vLargest = blockMax(vLargest);
  auto nearest = [&](int map, float x) {
    int size = map == 0 ? 255 : 256, lo = 0, hi = size;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (sorted[map][mid] < x)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == 0)
      return sortedCode[map][0];
    if (lo == size)
      return sortedCode[map][size - 1];
    return x - sorted[map][lo - 1] <= sorted[map][lo] - x
               ? sortedCode[map][lo - 1]
               : sortedCode[map][lo];
  };
  float mInverse = mLargest > 0.0f ? 1.0f / mLargest : 0.0f;
  float vInverse = vLargest > 0.0f ? 1.0f / vLargest : 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    newMCodes[i] = nearest(0, moments[i - begin] * mInverse);
    newVCodes[i] = nearest(1, moments[kMaxQuantBlock + (i - begin)] * vInverse);
  }
  if (threadIdx.x == 0) {
    newMMax[b] = mLargest;
    newVMax[b] = vLargest;
  }
}

/// One tensor of an adamw8bit group: its operands and results in the
/// regions, its elements and the first of its quantization blocks in the
/// group's.
struct Adam8bitTensor {
  TensorRef param, grad, mCodes, mMax, vCodes, vMax, newParam, newMCodes,
      newMMax, newVCodes, newVMax;
  int64_t elements, firstBlock;
};

/// Every tensor of the group in one launch: thread block g of the grid
/// takes the group's quantization blocks g, g + gridDim.x, ... `clip` (or
/// null) scales each gradient as it is read, as in adamMultiTensor.
__device__ void adam8bitMultiTensor(const Regions &r,
                                    const Adam8bitTensor *tensors, int count,
                                    int64_t totalBlocks, int64_t blockSize,
                                    const float *lrPtr, const int64_t *stepPtr,
                                    double beta1, double beta2, double eps,
                                    double weightDecay, const float *skip,
                                    const float *clip) {
  for (int64_t g = blockIdx.x; g < totalBlocks; g += gridDim.x) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (tensors[mid].firstBlock <= g)
        lo = mid;
      else
        hi = mid - 1;
    }
    const Adam8bitTensor &t = tensors[lo];
    auto f = [&](const TensorRef &ref) {
      return reinterpret_cast<float *>(regionBase(r, ref.region) + ref.offset);
    };
    auto u8 = [&](const TensorRef &ref) {
      return regionBase(r, ref.region) + ref.offset;
    };
    adam8bitBlock(g - t.firstBlock, t.elements, blockSize, f(t.param),
                  f(t.grad), u8(t.mCodes), f(t.mMax), u8(t.vCodes), f(t.vMax),
                  f(t.newParam), u8(t.newMCodes), f(t.newMMax), u8(t.newVCodes),
                  f(t.newVMax), lrPtr, stepPtr, beta1, beta2, eps, weightDecay,
                  skip, clip);
  }
}

} // namespace cuda
} // namespace mnemo

//===----------------------------------------------------------------------===//
// The executor's fallbacks (runtime/cuda/CudaExecutor.cu), in every module
//===----------------------------------------------------------------------===//

/// A GEMM's bias epilogue when cuBLASLt has no algorithm with it fused:
/// c[i, j] = act(c[i, j] + bias[j]) on the f32 result (kind 1: none, 2:
/// ReLU, 3: GELU's tanh form, as CUBLASLT_EPILOGUE_GELU_BIAS).
extern "C" __global__ void __launch_bounds__(256)
    mnemoBiasEpilogue(float *c, const float *bias, int64_t rows, int64_t cols,
                      int64_t ldc, int kind) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       i < rows * cols; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t row = i / cols, col = i % cols;
    float v = c[row * ldc + col] + bias[col];
    if (kind == 2)
      v = mnemo::elementwise::relu(v);
    else if (kind == 3)
      v = mnemo::elementwise::gelu(v, 1.0f);
    c[row * ldc + col] = v;
  }
}

/// An int8 GEMM, c = a @ b^T with exact int32 sums (as CUBLAS_COMPUTE_32I),
/// when cuBLASLt has no int8 algorithm for the shape.
extern "C" __global__ void __launch_bounds__(256)
    mnemoGemmInt8(int64_t m, int64_t n, int64_t k, const int8_t *a, int64_t lda,
                  const int8_t *b, int64_t ldb, int32_t *c, int64_t ldc) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < m * n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t row = i / n, col = i % n;
    int32_t sum = 0;
    for (int64_t e = 0; e < k; ++e)
      sum += int32_t(a[row * lda + e]) * int32_t(b[col * ldb + e]);
    c[row * ldc + col] = sum;
  }
}

/// The pointer tables of a GEMM over two batch dimensions (GemmCall's
/// outer batch): product i = o * inner + j reads a + o * aOuter + j * aInner
/// (strides in bytes), and likewise b and c; A's pointers, then B's, then
/// C's.
extern "C" __global__ void __launch_bounds__(256)
    mnemoGemmPointers(const uint8_t *a, const uint8_t *b, uint8_t *c,
                      int64_t outer, int64_t inner, int64_t aOuter,
                      int64_t aInner, int64_t bOuter, int64_t bInner,
                      int64_t cOuter, int64_t cInner, uint8_t **table) {
  int64_t count = outer * inner;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = i / inner, j = i % inner;
    table[i] = const_cast<uint8_t *>(a) + o * aOuter + j * aInner;
    table[count + i] = const_cast<uint8_t *>(b) + o * bOuter + j * bInner;
    table[2 * count + i] = c + o * cOuter + j * cInner;
  }
}

#endif // MNEMO_RUNTIME_CUDA_KERNELS_CUH
