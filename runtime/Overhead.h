//===- Overhead.h - What the CPU trainer needs beyond the plan --*- C++ -*-===//
//
// The plan accounts for every tensor of a step. A running trainer needs a
// little more, and says how much up front (mnemoc --memory-report prints
// it; a test checks the trainer's peak RSS growth against it):
//
// - two staging buffers of one batch each, which the loader thread fills
//   while the step runs;
// - OpenBLAS's packing buffer, as far as the model's GEMMs touch it;
// - a fixed allowance for everything else: the worker threads' stacks,
//   the C++ and C libraries' allocations.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_OVERHEAD_H
#define MNEMO_RUNTIME_OVERHEAD_H

#include <cstdint>

namespace mnemo::runtime {

/// Threads, OpenBLAS buffers, libraries: measured at 2 to 4 MiB on the
/// examples with 2 threads (test/trainer/memory.test checks it there).
/// Each further thread adds the touched part of its stack and of its
/// OpenBLAS packing buffers, a few hundred KiB for these models; 16 MiB
/// leaves room for a few dozen.
constexpr int64_t kCpuTrainerFixedOverheadBytes = int64_t(16) << 20;

/// OpenBLAS packs GEMM operands into a buffer of its own, allocated once
/// (128 MiB in Debian's build) and touched as far as a GEMM's blocks reach:
/// about the packed operand for small ones, more for large ones (GPT-2
/// small's 50,257 x 768 logits GEMM touched 47 to 73 MiB, by kernel; a
/// 784 x 512 layer a few hundred KiB, within the fixed allowance). The
/// bound: the largest GEMM operand, at most the whole buffer.
constexpr int64_t kOpenBlasBufferBytes = int64_t(128) << 20;

/// The most the CPU trainer's resident memory grows during training beyond
/// the plan's regions, for a step whose batch takes `inputBytes` and whose
/// largest GEMM operand takes `largestGemmOperandBytes`.
constexpr int64_t cpuTrainerOverheadBytes(int64_t inputBytes,
                                          int64_t largestGemmOperandBytes) {
  return kCpuTrainerFixedOverheadBytes + 2 * inputBytes +
         (largestGemmOperandBytes < kOpenBlasBufferBytes
              ? largestGemmOperandBytes
              : kOpenBlasBufferBytes);
}

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_OVERHEAD_H
