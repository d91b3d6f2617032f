//===- Emulator.h - Running CUDA blocks as fibers on the CPU ----*- C++ -*-===//
//
// The emulator's block scheduler: a kernel launch runs its blocks one after
// another; the threads of a block are fibers (Boost.Context) on the calling
// thread, switched at barriers, so __syncthreads and warp shuffles have
// their CUDA meaning for kernels whose every thread reaches them.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_TEST_CUDA_EMULATOR_EMULATOR_H
#define MNEMO_TEST_CUDA_EMULATOR_EMULATOR_H

#include <cstdint>

namespace mnemo::emulator {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};

struct ThreadContext {
  Index thread, block, blockDim, gridDim;
};

/// The running CUDA thread's indices.
const ThreadContext &current();
/// __syncthreads: waits until every live thread of the block arrives.
void barrier();
/// __shfl_xor_sync over the block's warps (every thread must call it).
float shuffleXor(float value, int laneMask);

/// Runs `kernel(argument)` over a grid of gridX x gridY blocks of `block`
/// threads.
void launch(void (*kernel)(const void *argument), const void *argument,
            unsigned gridX, unsigned gridY, unsigned block);

} // namespace mnemo::emulator

#endif // MNEMO_TEST_CUDA_EMULATOR_EMULATOR_H
