//===- DataMovementKernels.cpp - Slices, concat, masks on the CPU ---------===//
//
// Part of the trainer's runtime (built with the CPU kernels, and copied
// into --emit=project trees): plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/datamovement/DataMovementKernels.h"

#include <cstring>

namespace mnemo::cpu {

void causalMask(uint8_t *out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = c <= r + (cols - rows) ? 1 : 0;
}

void sliceCopy(const void *in, void *out, int64_t elementBytes, int64_t outer,
               int64_t axisIn, int64_t inner, int64_t start, int64_t count,
               int64_t step, bool grad) {
  const uint8_t *src = static_cast<const uint8_t *>(in);
  uint8_t *dst = static_cast<uint8_t *>(out);
  int64_t row = inner * elementBytes;
  if (grad)
    std::memset(dst, 0, outer * axisIn * row);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      int64_t big = (o * axisIn + start + j * step) * row;
      int64_t small = (o * count + j) * row;
      if (grad)
        std::memcpy(dst + big, src + small, row);
      else
        std::memcpy(dst + small, src + big, row);
    }
}

void concatPart(const void *in, void *out, int64_t elementBytes, int64_t outer,
                int64_t n, int64_t inner, int64_t axisOut, int64_t offset) {
  const uint8_t *src = static_cast<const uint8_t *>(in);
  uint8_t *dst = static_cast<uint8_t *>(out);
  int64_t row = n * inner * elementBytes;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + (o * axisOut + offset) * inner * elementBytes,
                src + o * row, row);
}

} // namespace mnemo::cpu
