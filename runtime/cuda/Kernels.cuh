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
#include "runtime/FakeQuantRules.h"
#include "runtime/PruneRules.h"
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

//===----------------------------------------------------------------------===//
// Pruning (runtime/PruneRules.h; the host twin is runtime/Prune.h)
//===----------------------------------------------------------------------===//

/// `apply_mask` on elements of `Bits` (uint32_t for f32, uint16_t for
/// 16-bit floats, uint8_t for 8-bit codes): zero bits are zero.
template <typename Bits>
__device__ void applyMask(int64_t n, const Bits *in, const uint32_t *mask,
                          Bits *out, const int32_t *when) {
  // `when` 0: the input as it is (in place, nothing to do).
  bool masking = !when || *when != 0;
  if (!masking && in == out)
    return;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = masking && ((mask[i >> 5] >> (i & 31)) & 1u) ? Bits(0) : in[i];
}

/// One pruned tensor of a `prune_masks` op: its weight, its mask and new
/// mask, and (structured pruning) its slices along the pruned dim.
struct PruneRef {
  TensorRef weight, mask, newMask;
  int64_t slices, inner;
};

/// The most slices a structured target may have on the GPU (one bit each
/// in shared memory).
constexpr int kMaxPruneSlices = 65536;

__device__ __forceinline__ bool maskBit(const uint32_t *mask, int64_t i) {
  return (mask[i >> 5] >> (i & 31)) & 1u;
}

/// A structured slice's key: its L1 or L2 (squared) norm summed in double
/// in index order by one thread, as the host does it.
__device__ unsigned sliceKey(const float *w, const uint32_t *mask,
                             const PruneRef &t, int64_t s, bool l1) {
  int64_t outer = t.weight.count / (t.slices * t.inner);
  double sum = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < t.inner; ++i) {
      double v = w[(o * t.slices + s) * t.inner + i];
      sum += l1 ? fabs(v) : v * v;
    }
  return prune::pruneKey(float(sum), maskBit(mask, s * t.inner));
}

/// Exclusive prefix sum of `value` over the block (at most 1024 threads);
/// `total` gets the block's sum.
__device__ unsigned long long blockExclusiveScan(unsigned long long value,
                                                 unsigned long long *total) {
  __shared__ unsigned long long scan[1024];
  scan[threadIdx.x] = value;
  __syncthreads();
  for (unsigned offset = 1; offset < blockDim.x; offset <<= 1) {
    unsigned long long add =
        threadIdx.x >= offset ? scan[threadIdx.x - offset] : 0;
    __syncthreads();
    scan[threadIdx.x] += add;
    __syncthreads();
  }
  unsigned long long exclusive = scan[threadIdx.x] - value;
  *total = scan[blockDim.x - 1];
  __syncthreads();
  return exclusive;
}

/// `prune_masks` in one thread block: masks are rare updates (every
/// `every` steps), and one block needs no grid-wide synchronization for
/// the radix selection. Other steps copy the masks, when not in place.
/// method: 0 magnitude (the targets as one pool), 1 structured, 2 N:M.
__device__ void pruneMasks(const Regions &r, const PruneRef *targets, int count,
                           const int64_t *step, int method, double sparsity,
                           long long start, long long end, long long every,
                           bool l1, int n, int m, int32_t *updated) {
  auto weightOf = [&](const PruneRef &t) {
    return reinterpret_cast<const float *>(regionBase(r, t.weight.region) +
                                           t.weight.offset);
  };
  auto maskOf = [&](const PruneRef &t) {
    return reinterpret_cast<uint32_t *>(regionBase(r, t.newMask.region) +
                                        t.newMask.offset);
  };
  // The new masks start as the old ones; the rules read them from there.
  for (int t = 0; t < count; ++t) {
    const uint32_t *from = reinterpret_cast<const uint32_t *>(
        regionBase(r, targets[t].mask.region) + targets[t].mask.offset);
    uint32_t *to = maskOf(targets[t]);
    if (from != to)
      for (int64_t w = threadIdx.x; w < targets[t].mask.count; w += blockDim.x)
        to[w] = from[w];
  }
  __syncthreads();
  double target = 0;
  if (!prune::scheduledSparsity(
          *step, start, end, every,
          method == 2 ? 1.0 - double(n) / double(m) : sparsity, &target)) {
    if (threadIdx.x == 0)
      *updated = 0;
    return;
  }
  if (threadIdx.x == 0)
    *updated = 1;

  if (method == 2) { // N:M: each thread takes whole mask words
    for (int t = 0; t < count; ++t) {
      const float *w = weightOf(targets[t]);
      uint32_t *mask = maskOf(targets[t]);
      int64_t elements = targets[t].weight.count;
      for (int64_t word = threadIdx.x; word < targets[t].mask.count;
           word += blockDim.x) {
        uint32_t bits = 0;
        for (int g = 0; g < 32 && word * 32 + g < elements; g += m) {
          unsigned keys[32];
          for (int j = 0; j < m; ++j) {
            int64_t e = word * 32 + g + j;
            keys[j] = prune::pruneKey(fabsf(w[e]), maskBit(mask, e));
          }
          bits |= prune::nmGroupPruned(keys, m, n) << g;
        }
        mask[word] = bits;
      }
    }
    return;
  }

  // The k-th smallest key by radix selection: four 256-bin histograms.
  __shared__ unsigned long long histogram[256];
  __shared__ unsigned long long rankShared;
  __shared__ unsigned prefixShared;
  __shared__ unsigned long long taken;
  auto select = [&](long long k, auto forEachKey) {
    if (threadIdx.x == 0) {
      rankShared = (unsigned long long)(k - 1);
      prefixShared = 0;
    }
    unsigned known = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = threadIdx.x; b < 256; b += blockDim.x)
        histogram[b] = 0;
      __syncthreads();
      unsigned prefix = prefixShared;
      forEachKey([&](unsigned key) {
        if ((key & known) == prefix)
          atomicAdd(&histogram[(key >> shift) & 255u], 1ull);
      });
      __syncthreads();
      if (threadIdx.x == 0) {
        unsigned long long rank = rankShared;
        prefixShared |= prune::pickBin(histogram, &rank) << shift;
        rankShared = rank;
      }
      known |= 255u << shift;
      __syncthreads();
    }
  };

  if (method == 1) { // structured, one target at a time
    __shared__ uint32_t pruned[kMaxPruneSlices / 32];
    for (int t = 0; t < count; ++t) {
      const PruneRef &x = targets[t];
      const float *w = weightOf(x);
      uint32_t *mask = maskOf(x);
      long long k = prune::prunedCount(target, x.slices);
      for (int64_t i = threadIdx.x; i < (x.slices + 31) / 32; i += blockDim.x)
        pruned[i] = 0;
      __syncthreads();
      if (k > 0) {
        select(k, [&](auto visit) {
          for (int64_t s = threadIdx.x; s < x.slices; s += blockDim.x)
            visit(sliceKey(w, mask, x, s, l1));
        });
        // Ties in slice order: one thread (slices are few).
        if (threadIdx.x == 0) {
          unsigned long long ties = rankShared + 1, tiesTaken = 0;
          for (int64_t s = 0; s < x.slices; ++s) {
            unsigned key = sliceKey(w, mask, x, s, l1);
            if (key < prefixShared ||
                (key == prefixShared && tiesTaken++ < ties))
              pruned[s >> 5] |= 1u << (s & 31);
          }
        }
        __syncthreads();
      }
      for (int64_t word = threadIdx.x; word < x.mask.count;
           word += blockDim.x) {
        uint32_t bits = 0;
        for (int j = 0; j < 32 && word * 32 + j < x.weight.count; ++j) {
          int64_t s = ((word * 32 + j) / x.inner) % x.slices;
          bits |= ((pruned[s >> 5] >> (s & 31)) & 1u) << j;
        }
        mask[word] = bits;
      }
      __syncthreads();
    }
    return;
  }

  // Magnitude: the targets as one pool, ties in index order.
  long long total = 0;
  for (int t = 0; t < count; ++t)
    total += targets[t].weight.count;
  long long k = prune::prunedCount(target, total);
  if (k > 0)
    select(k, [&](auto visit) {
      for (int t = 0; t < count; ++t) {
        const float *w = weightOf(targets[t]);
        const uint32_t *mask = maskOf(targets[t]);
        for (int64_t e = threadIdx.x; e < targets[t].weight.count;
             e += blockDim.x)
          visit(prune::pruneKey(fabsf(w[e]), maskBit(mask, e)));
      }
    });
  unsigned threshold = prefixShared;
  unsigned long long ties = k > 0 ? rankShared + 1 : 0;
  if (threadIdx.x == 0)
    taken = 0;
  __syncthreads();
  for (int t = 0; t < count; ++t) {
    const float *w = weightOf(targets[t]);
    uint32_t *mask = maskOf(targets[t]);
    int64_t elements = targets[t].weight.count, words = targets[t].mask.count;
    for (int64_t base = 0; base < words; base += blockDim.x) {
      int64_t word = base + threadIdx.x;
      uint32_t less = 0, equal = 0;
      if (word < words && k > 0)
        for (int j = 0; j < 32 && word * 32 + j < elements; ++j) {
          int64_t e = word * 32 + j;
          unsigned key = prune::pruneKey(fabsf(w[e]), maskBit(mask, e));
          less |= uint32_t(key < threshold) << j;
          equal |= uint32_t(key == threshold) << j;
        }
      unsigned long long chunkTies = 0;
      unsigned long long before = blockExclusiveScan(__popc(equal), &chunkTies);
      if (word < words) {
        unsigned long long rank = taken + before;
        for (int j = 0; j < 32; ++j)
          if ((equal >> j) & 1u) {
            if (rank < ties)
              less |= 1u << j;
            ++rank;
          }
        mask[word] = less;
      }
      __syncthreads();
      if (threadIdx.x == 0)
        taken += chunkTies;
      __syncthreads();
    }
  }
}

//===----------------------------------------------------------------------===//
// Quantization-aware training (runtime/FakeQuantRules.h)
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
// Compressed weights for inference (runtime/FakeQuantRules.h's arithmetic)
//===----------------------------------------------------------------------===//

/// `quantize_rows`: block m quantizes row m of x [rows, k].
__device__ void quantizeRows(int64_t k, const float *x, int8_t *codes,
                             float *scale, int32_t *sum) {
  __shared__ int total;
  int64_t m = blockIdx.x;
  const float *row = x + m * k;
  float absMax = 0.0f;
  for (int64_t c = threadIdx.x; c < k; c += blockDim.x)
    absMax = fmaxf(absMax, fabsf(row[c]));
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
