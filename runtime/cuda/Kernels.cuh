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

namespace mnemo::cuda {

/// The generated code's names for the 16-bit float types (the CPU backend
/// has its own, runtime/cpu/Half.h).
typedef __nv_bfloat16 bf16_t;
typedef __half f16_t;

/// The plan's regions on the device; every generated kernel takes this one
/// argument and addresses everything at offsets from it: constants, or the
/// launch site's offsets (`site`) for a kernel that several sites launch.
struct Regions {
  uint8_t *A; // arena
  uint8_t *P; // parameters
  uint8_t *G; // gradients
  uint8_t *S; // optimizer state
  uint8_t *I; // the batch
  uint8_t *W; // workspace (cuBLASLt, cuDNN, and the kernels' partial sums)
  uint8_t *B; // buffers (running statistics)
  int64_t *control;
  /// The launch's index where an op launches one kernel in a host loop
  /// (linear_cross_entropy's chunks); 0 otherwise.
  int64_t index;
  /// The site's byte offsets into the regions (codegen/CudaEmitter.cpp's
  /// KernelSet), as many as runtime/cuda/CudaModel.h's kMaxSiteOffsets.
  /// Kernel arguments, as the bases are: the compiler reads them from the
  /// constant bank wherever it needs them, as it would a constant.
  int64_t site[12];
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

// Generated code reads the plan's bytes as elements through these.
#define MNEMO_ELEMENTS_AS(name, T)                                             \
  __device__ __forceinline__ T *name(uint8_t *p) {                             \
    return reinterpret_cast<T *>(p);                                           \
  }
MNEMO_ELEMENTS_AS(f32, float)
MNEMO_ELEMENTS_AS(bf16, __nv_bfloat16)
MNEMO_ELEMENTS_AS(f16, __half)
MNEMO_ELEMENTS_AS(i64, int64_t)
MNEMO_ELEMENTS_AS(i32, int32_t)
MNEMO_ELEMENTS_AS(i16, int16_t)
MNEMO_ELEMENTS_AS(i8, int8_t)
#undef MNEMO_ELEMENTS_AS
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
  case 6:
    return r.B;
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

} // namespace mnemo::cuda

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
