//===- EmbeddingKernels.h - Embeddings on the CPU ---------------*- C++ -*-===//
//
// The CPU kernels generated code calls for embedding and embedding_grad
// (the emission model, EmbeddingEmission.cpp, includes this header where a
// model uses them). An index outside the table is reported through the
// kernels' error channel (runtime/cpu/Kernels.h's reportError), which the
// trainer reads after the step. Part of the runtime side of the family:
// plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_EMBEDDING_EMBEDDINGKERNELS_H
#define MNEMO_LANG_OPS_EMBEDDING_EMBEDDINGKERNELS_H

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace mnemo::cpu {

inline void reportIndexOutOfRange(int64_t index, int64_t rows) {
  reportError("index " + std::to_string(index) + " is out of range for " +
              std::to_string(rows) + " rows");
}

/// out[i] = table[indices[i]], in the table's element type (f32, or bf16
/// and f16 storage); false if an index is out of range.
template <typename T>
inline bool embedding(const T *table, const int32_t *indices, int64_t count,
                      int64_t rows, int64_t dim, T *out) {
  for (int64_t i = 0; i < count; ++i) {
    int32_t row = indices[i];
    if (row < 0 || row >= rows) {
      reportIndexOutOfRange(row, rows);
      return false;
    }
    std::memcpy(out + i * dim, table + int64_t(row) * dim, sizeof(T) * dim);
  }
  return true;
}

/// out[indices[i]] += grad[i] into a zeroed [rows, dim] table; false if an
/// index is out of range. In f32 only: the gradient rule sums a 16-bit
/// table's rows in f32 (EmbeddingOps.cpp).
inline bool embeddingGrad(const float *grad, const int32_t *indices,
                          int64_t count, int64_t rows, int64_t dim,
                          float *out) {
  std::fill(out, out + rows * dim, 0.0f);
  for (int64_t i = 0; i < count; ++i)
    if (indices[i] < 0 || indices[i] >= rows) {
      reportIndexOutOfRange(indices[i], rows);
      return false;
    }
  // Columns in parallel, rows in order: deterministic sums.
  parallelFor(dim, 8, [&](int64_t begin, int64_t end) {
    for (int64_t i = 0; i < count; ++i) {
      float *dst = out + int64_t(indices[i]) * dim;
      const float *src = grad + i * dim;
      for (int64_t j = begin; j < end; ++j)
        dst[j] += src[j];
    }
  });
  return true;
}

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_EMBEDDING_EMBEDDINGKERNELS_H
