//===- DataMovementKernels.cuh - Slices, concat, masks on GPU -*- CUDA -*-===//
//
// The device functions the generated kernels call for slice, slice_grad,
// concat and causal_mask: one thread per element moved. Included by the
// generated kernel source after runtime/cuda/Kernels.cuh; NVRTC is given it
// by name (runtime/cuda/MnemoCuda.cmake), so it includes nothing itself.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_DATAMOVEMENT_DATAMOVEMENTKERNELS_CUH
#define MNEMO_LANG_OPS_DATAMOVEMENT_DATAMOVEMENTKERNELS_CUH

namespace mnemo::cuda {

__device__ void causalMask(uint8_t *out, int64_t rows, int64_t cols) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= rows * cols)
    return;
  int64_t r = e / cols, c = e % cols;
  out[e] = c <= r + (cols - rows) ? 1 : 0;
}

/// A slice along one axis ([outer, axis, inner]), or its gradient (the
/// slice written into a zeroed tensor: the host zeroes it first). One
/// thread per element of the slice.
template <typename T>
__device__ void sliceCopy(const T *in, T *out, int64_t outer, int64_t axisIn,
                          int64_t inner, int64_t start, int64_t count,
                          int64_t step, bool grad) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= outer * count * inner)
    return;
  int64_t k = e % inner, j = (e / inner) % count, o = e / (inner * count);
  int64_t big = (o * axisIn + start + j * step) * inner + k;
  if (grad)
    out[big] = in[e];
  else
    out[e] = in[big];
}

/// One input of a concatenation into its place along the axis.
template <typename T>
__device__ void concatPart(const T *in, T *out, int64_t outer, int64_t n,
                           int64_t inner, int64_t axisOut, int64_t offset) {
  int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= outer * n * inner)
    return;
  int64_t o = e / (n * inner), rest = e % (n * inner);
  out[(o * axisOut + offset) * inner + rest] = in[e];
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_DATAMOVEMENT_DATAMOVEMENTKERNELS_CUH
