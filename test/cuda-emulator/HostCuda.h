//===- HostCuda.h - CUDA kernels as host C++, for the emulator --*- C++ -*-===//
//
// Force-included (-include) when the test suite compiles a model's
// generated kernels and runtime/cuda/Kernels.cuh as plain C++: the CUDA
// keywords, thread indices, barriers, warp shuffles and atomics the kernels
// use, implemented by the emulator's block scheduler (Emulator.h), which
// runs each CUDA thread of a block as a fiber. Only what Mnemo's kernels
// use, with their discipline: every barrier and shuffle is reached by all
// threads of the block that have not returned.
//
// Not a CUDA implementation: it exists so that, on machines without a GPU,
// the generated kernels (their index math, launch configurations, partial
// sums and tables) are checked by running them against the CPU trainer.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_TEST_CUDA_EMULATOR_HOSTCUDA_H
#define MNEMO_TEST_CUDA_EMULATOR_HOSTCUDA_H

#include "test/cuda-emulator/Emulator.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_types.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
// One block runs at a time, so a function's static is its block's shared
// memory.
#define __shared__ static

#define threadIdx (::mnemo::emulator::current().thread)
#define blockIdx (::mnemo::emulator::current().block)
#define blockDim (::mnemo::emulator::current().blockDim)
#define gridDim (::mnemo::emulator::current().gridDim)

inline void __syncthreads() { ::mnemo::emulator::barrier(); }

inline float __shfl_xor_sync(unsigned, float value, int laneMask) {
  return ::mnemo::emulator::shuffleXor(value, laneMask);
}

inline float atomicAdd(float *address, float value) {
  // Fibers of one OS thread: no two run at once.
  float old = *address;
  *address = old + value;
  return old;
}
/// Four int8 products of a and b's bytes, added to c.
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i)
    c += int(int8_t(uint32_t(a) >> (8 * i))) *
         int(int8_t(uint32_t(b) >> (8 * i)));
  return c;
}
inline int atomicAdd(int *address, int value) {
  int old = *address;
  *address += value;
  return old;
}
inline unsigned long long atomicAdd(unsigned long long *address,
                                    unsigned long long value) {
  unsigned long long old = *address;
  *address = old + value;
  return old;
}
inline int __popc(unsigned bits) { return __builtin_popcount(bits); }
inline unsigned long long atomicCAS(unsigned long long *address,
                                    unsigned long long compare,
                                    unsigned long long value) {
  unsigned long long old = *address;
  if (old == compare)
    *address = value;
  return old;
}

inline float __int_as_float(int bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
template <typename A, typename B> inline A max(A a, B b) {
  return a > A(b) ? a : A(b);
}
template <typename A, typename B> inline A min(A a, B b) {
  return a < A(b) ? a : A(b);
}
using std::cos;
using std::fabs;
using std::fmax;
using std::fmin;
using std::isfinite;
using std::isinf;
using std::isnan;
using std::pow;
using std::sqrt;

#endif // MNEMO_TEST_CUDA_EMULATOR_HOSTCUDA_H
