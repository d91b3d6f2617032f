//===- EmbeddingKernels.cuh - Embeddings on the GPU ------------*- CUDA -*-===//
//
// The device functions the generated kernels call for embedding and
// embedding_grad: one thread per output element. The gradient is a
// scatter-add with f32 atomics into a table the host zeroes first (the one
// place where the CUDA backend's sums are not in a fixed order). Included
// by the generated kernel source after runtime/cuda/Kernels.cuh, whose
// helpers (st, raiseError) it uses; NVRTC is given it by name
// (runtime/cuda/MnemoCuda.cmake).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_EMBEDDING_EMBEDDINGKERNELS_CUH
#define MNEMO_LANG_OPS_EMBEDDING_EMBEDDINGKERNELS_CUH

namespace mnemo::cuda {

/// out[i] = table[indices[i]]; an index out of range raises the step's
/// error and reads as zeros.
template <typename T>
__device__ void embedding(const Regions &r, const T *table,
                          const int32_t *indices, int64_t count, int64_t rows,
                          int64_t dim, T *out) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= count * dim)
    return;
  int64_t i = e / dim, j = e % dim;
  int32_t row = indices[i];
  bool valid = row >= 0 && row < rows;
  if (!valid && j == 0)
    raiseError(r, kIndexOutOfRange, row);
  out[e] = valid ? table[int64_t(row) * dim + j] : st<T>(0.0f);
}

/// Scatter-add into a zeroed table gradient (the host zeroes it first).
__device__ void embeddingGradScatter(const float *grad, const int32_t *indices,
                                     int64_t count, int64_t rows, int64_t dim,
                                     float *out) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= count * dim)
    return;
  int64_t i = e / dim, j = e % dim;
  int32_t row = indices[i];
  if (row >= 0 && row < rows)
    atomicAdd(&out[int64_t(row) * dim + j], grad[e]);
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_EMBEDDING_EMBEDDINGKERNELS_CUH
