//===- Overhead.h - What the CPU trainer needs beyond the plan --*- C++ -*-===//
//
// The plan accounts for every tensor of a step. A running trainer needs a
// little more, and says how much up front (mnemoc --memory-report prints
// it; a test checks the trainer's peak RSS growth against it):
//
// - two staging buffers of one batch each, which the loader thread fills
//   while the step runs;
// - a fixed allowance for everything else: the worker threads' stacks,
//   OpenBLAS's per-thread packing buffers (bounded by its blocking sizes,
//   not by the model), the C++ and C libraries' allocations.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_OVERHEAD_H
#define MNEMO_RUNTIME_OVERHEAD_H

#include <cstdint>

namespace mnemo {
namespace runtime {

/// Threads, OpenBLAS buffers, libraries: measured at 2 to 4 MiB on the
/// examples with 2 threads (test/trainer/memory.test checks it there).
/// Each further thread adds the touched part of its stack and of its
/// OpenBLAS packing buffers, a few hundred KiB for these models; 16 MiB
/// leaves room for a few dozen.
constexpr int64_t kCpuTrainerFixedOverheadBytes = int64_t(16) << 20;

/// The most the CPU trainer's resident memory grows during training beyond
/// the plan's regions, for a step whose batch takes `inputBytes`.
constexpr int64_t cpuTrainerOverheadBytes(int64_t inputBytes) {
  return kCpuTrainerFixedOverheadBytes + 2 * inputBytes;
}

} // namespace runtime
} // namespace mnemo

#endif // MNEMO_RUNTIME_OVERHEAD_H
