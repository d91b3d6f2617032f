//===- ReductionsKernels.cuh - sum, mean and max on the GPU ----*- CUDA -*-===//
//
// The device functions the generated kernels call for mnemo.sum, mean, max
// and max_grad; the emission model (ReductionsEmission.cpp) merges
// neighbouring dimensions of the same kind and picks one of three schemes
// by the shape. Included by the generated kernel source after
// runtime/cuda/Kernels.cuh, whose helpers (ld, st, nanMax, blockMax,
// blockSum) it uses; NVRTC is given it by name
// (runtime/cuda/MnemoCuda.cmake), so it includes nothing itself.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_REDUCTIONS_REDUCTIONSKERNELS_CUH
#define MNEMO_LANG_OPS_REDUCTIONS_REDUCTIONSKERNELS_CUH

namespace mnemo::cuda {

/// A reduction split into kept and reduced dimensions (coalesced by the
/// emitter, at most four of each), with the input's strides.
struct ReduceShape {
  int keptRank;
  int64_t keptDims[4], keptStrides[4];
  int reducedRank;
  int64_t reducedDims[4], reducedStrides[4];
  int64_t outputs, perOutput;
};

__device__ __forceinline__ int64_t keptOffset(const ReduceShape &s, int64_t o) {
  int64_t offset = 0;
  for (int d = s.keptRank - 1; d >= 0; --d) {
    offset += (o % s.keptDims[d]) * s.keptStrides[d];
    o /= s.keptDims[d];
  }
  return offset;
}
__device__ __forceinline__ int64_t reducedOffset(const ReduceShape &s,
                                                 int64_t q) {
  int64_t offset = 0;
  for (int d = s.reducedRank - 1; d >= 0; --d) {
    offset += (q % s.reducedDims[d]) * s.reducedStrides[d];
    q /= s.reducedDims[d];
  }
  return offset;
}

enum ReduceKind { kSum = 0, kMean = 1, kMax = 2 };

/// One block per output: for reductions over many elements (rows, the
/// whole tensor).
template <int Kind, typename T>
__device__ void reduceBlockPerOutput(const ReduceShape &s, const T *x, T *y) {
  for (int64_t o = blockIdx.x; o < s.outputs; o += gridDim.x) {
    const T *base = x + keptOffset(s, o);
    float acc = Kind == kMax ? -INFINITY : 0.0f;
    for (int64_t q = threadIdx.x; q < s.perOutput; q += blockDim.x) {
      float v = ld(base[reducedOffset(s, q)]);
      acc = Kind == kMax ? nanMax(acc, v) : acc + v;
    }
    acc = Kind == kMax ? blockMax(acc) : blockSum(acc);
    if (threadIdx.x == 0)
      y[o] = st<T>(Kind == kMean ? acc / float(s.perOutput) : acc);
  }
}

/// One thread per output: for many outputs that are contiguous in the
/// input (a bias gradient: the sum over rows, read along columns).
template <int Kind, typename T>
__device__ void reduceThreadPerOutput(const ReduceShape &s, const T *x, T *y) {
  int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= s.outputs)
    return;
  const T *base = x + keptOffset(s, o);
  float acc = Kind == kMax ? -INFINITY : 0.0f;
  for (int64_t q = 0; q < s.perOutput; ++q) {
    float v = ld(base[reducedOffset(s, q)]);
    acc = Kind == kMax ? nanMax(acc, v) : acc + v;
  }
  y[o] = st<T>(Kind == kMean ? acc / float(s.perOutput) : acc);
}

/// Many outputs contiguous in the input with many elements each (a bias
/// gradient: the sum of 8,192 rows for each of 768 columns): a grid of
/// (column tiles of 32, chunks of rows). Block (tile, c) sums chunk c's rows
/// for its 32 columns, 8 rows at a time, coalesced along the columns, into
/// partial[c][output]; reduceColumnsFinish adds the chunks in order. The
/// emitter picks the chunks so that the grid fills the SMs. Deterministic.
constexpr int kColumnTile = 32, kColumnLanes = 8;
template <int Kind, typename T>
__device__ void reduceColumnsPartial(const ReduceShape &s, const T *x,
                                     float *partial, int64_t chunks) {
  __shared__ float sums[kColumnLanes][kColumnTile + 1];
  int column = threadIdx.x % kColumnTile, lane = threadIdx.x / kColumnTile;
  int64_t o = int64_t(blockIdx.x) * kColumnTile + column;
  int64_t per = (s.perOutput + chunks - 1) / chunks;
  int64_t begin = int64_t(blockIdx.y) * per;
  int64_t end = begin + per < s.perOutput ? begin + per : s.perOutput;
  float acc = Kind == kMax ? -INFINITY : 0.0f;
  if (o < s.outputs && s.keptRank == 1 && s.reducedRank == 1) {
    // The usual case (rows x columns): plain strides, no index arithmetic.
    const T *base = x + o * s.keptStrides[0];
    const int64_t stride = s.reducedStrides[0];
    for (int64_t q = begin + lane; q < end; q += kColumnLanes) {
      float v = ld(base[q * stride]);
      acc = Kind == kMax ? nanMax(acc, v) : acc + v;
    }
  } else if (o < s.outputs) {
    const T *base = x + keptOffset(s, o);
    for (int64_t q = begin + lane; q < end; q += kColumnLanes) {
      float v = ld(base[reducedOffset(s, q)]);
      acc = Kind == kMax ? nanMax(acc, v) : acc + v;
    }
  }
  sums[lane][column] = acc;
  __syncthreads();
  if (lane == 0 && o < s.outputs) {
    for (int l = 1; l < kColumnLanes; ++l)
      acc = Kind == kMax ? nanMax(acc, sums[l][column]) : acc + sums[l][column];
    partial[blockIdx.y * s.outputs + o] = acc;
  }
}
template <int Kind, typename T>
__device__ void reduceColumnsFinish(const ReduceShape &s, const float *partial,
                                    int64_t chunks, T *y) {
  int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= s.outputs)
    return;
  float acc = Kind == kMax ? -INFINITY : 0.0f;
  for (int64_t c = 0; c < chunks; ++c) {
    float v = partial[c * s.outputs + o];
    acc = Kind == kMax ? nanMax(acc, v) : acc + v;
  }
  y[o] = st<T>(Kind == kMean ? acc / float(s.perOutput) : acc);
}

/// The gradient of a max reduction: shared equally among the elements
/// equal to the maximum. One thread per output.
template <typename T>
__device__ void maxGrad(const ReduceShape &s, const T *grad, const T *x,
                        const T *maximum, T *out) {
  int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= s.outputs)
    return;
  int64_t base = keptOffset(s, o);
  float m = ld(maximum[o]), ties = 0;
  for (int64_t q = 0; q < s.perOutput; ++q)
    ties += ld(x[base + reducedOffset(s, q)]) == m;
  float share = ld(grad[o]) / ties;
  for (int64_t q = 0; q < s.perOutput; ++q) {
    int64_t at = base + reducedOffset(s, q);
    out[at] = st<T>(ld(x[at]) == m ? share : 0.0f);
  }
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_REDUCTIONS_REDUCTIONSKERNELS_CUH
