//===- OptimizersKernels.cuh - The optimizer on the GPU --------*- CUDA -*-===//
//
// The device functions the generated kernels call for the optimizer's ops:
// one-thread kernels for the scalars (schedule, loss scale, clipping), a
// thread per element for SGD, and the multi-tensor launches of Adam(W) and
// adamw8bit, which update a whole group of parameters from a device table
// (OptimizersEmission.cpp). The arithmetic is OptimizersFormulas.h's, as on
// the CPU. Included by the generated kernel source after
// runtime/cuda/Kernels.cuh, whose helpers (ld, st, blockMax, blockSum,
// TensorRef, regionBase) it uses; NVRTC is given it and the formulas by
// name (runtime/cuda/MnemoCuda.cmake).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSKERNELS_CUH
#define MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSKERNELS_CUH

#include "lang/ops/optimizers/OptimizersFormulas.h"

namespace mnemo::cuda {

/// The learning rate of this step, on the device (one thread).
__device__ void lrSchedule(bool cosine, const int64_t *step,
                           const int64_t *totalSteps, double baseLr,
                           int64_t warmup, int64_t steps, double minLr,
                           float *out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) // one thread: it may read what
    return;                                // it writes (the loss scale)
  double total = steps > 0 ? double(steps) : double(*totalSteps);
  *out = float(optimizers::learningRate(cosine, double(*step), total, baseLr,
                                        double(warmup), minLr));
}

/// torch.cuda.amp.GradScaler.update (one thread): the scale and the count
/// of finite steps stay on the device.
__device__ void lossScaleUpdate(const float *norm, const float *scale,
                                const float *count, float *newScale,
                                float *newCount, float *skip,
                                double growthFactor, double backoffFactor,
                                int64_t growthInterval) {
  if (threadIdx.x != 0 || blockIdx.x != 0) // one thread: it may read what
    return;                                // it writes (the loss scale)
  optimizers::LossScale next =
      optimizers::nextLossScale(isfinite(*norm), *scale, *count, growthFactor,
                                backoffFactor, growthInterval);
  *newScale = next.scale;
  *newCount = next.count;
  *skip = next.skip;
}

__device__ void clipCoefficient(const float *norm, double maxNorm, float *out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) // one thread: it may read what
    return;                                // it writes (the loss scale)
  *out = optimizers::clipCoefficient(*norm, maxNorm);
}

/// One tensor of a multi-tensor Adam(W) update: where its parameter,
/// gradient, moments and their updated copies live, and where its elements
/// start in the flattened launch.
struct AdamTensor {
  TensorRef param, grad, expAvg, expAvgSq, newParam, newExpAvg, newExpAvgSq;
  int64_t first;
};

/// Every parameter of the group in one launch (a grid-stride loop over the
/// concatenated elements), torch.optim.AdamW's arithmetic in f32. `clip`
/// (or null): clip_grad_norm's coefficient, which scales each gradient as
/// it is read (the CUDA emitter folds the multiplies into this launch).
template <typename T>
__device__ void
adamMultiTensor(const Regions &r, const AdamTensor *tensors, int count,
                int64_t total, const float *lrPtr, const int64_t *stepPtr,
                double beta1, double beta2, double eps, double weightDecay,
                bool decoupled, const float *skip, const float *clip) {
  __shared__ optimizers::AdamScalars shared;
  if (threadIdx.x == 0)
    shared = optimizers::adamScalars(double(*lrPtr), double(*stepPtr), beta1,
                                     beta2, eps, weightDecay);
  __syncthreads();
  const optimizers::AdamScalars s = shared;
  // An overflowed f16 step (loss scaling) leaves everything as it is; the
  // updates are written in place, so there is nothing to copy.
  if (skip && *skip != 0.0f)
    return;
  int t = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    while (t + 1 < count && i >= tensors[t + 1].first)
      ++t;
    while (t > 0 && i < tensors[t].first)
      --t;
    const AdamTensor &a = tensors[t];
    int64_t k = i - a.first;
    auto at = [&](const TensorRef &ref) {
      return reinterpret_cast<T *>(regionBase(r, ref.region) + ref.offset) + k;
    };
    float p = ld(*at(a.param)), g = ld(*at(a.grad));
    // Gradient clipping folded in: the scaled gradient as the separate
    // multiply would have stored it.
    if (clip)
      g = ld(st<T>(g * *clip));
    float m = ld(*at(a.expAvg)), v = ld(*at(a.expAvgSq));
    optimizers::adamStep(s, decoupled, p, g, m, v);
    *at(a.newParam) = st<T>(p);
    *at(a.newExpAvg) = st<T>(m);
    *at(a.newExpAvgSq) = st<T>(v);
  }
}

template <typename T>
__device__ void sgdUpdate(int64_t n, const T *param, const T *grad,
                          const T *buffer, T *newParam, T *newBuffer,
                          const float *lrPtr, const int64_t *stepPtr,
                          double momentum, double dampening, double weightDecay,
                          bool nesterov) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float lr = *lrPtr;
  int64_t step = *stepPtr;
  float mu = float(momentum), damp = float(1.0 - dampening),
        wd = float(weightDecay);
  float p = ld(param[i]), g = ld(grad[i]);
  float d = wd != 0.0f ? g + wd * p : g;
  if (mu != 0.0f) {
    float b = step <= 1 ? d : mu * ld(buffer[i]) + damp * d;
    newBuffer[i] = st<T>(b);
    d = nesterov ? d + mu * b : b;
  } else if (newBuffer != buffer) {
    newBuffer[i] = buffer[i];
  }
  newParam[i] = st<T>(p - lr * d);
}

/// adamw8bit (OptimizersKernels.h): one CUDA block per quantization block
/// of at most kMaxQuantBlock elements. The block dequantizes, updates in
/// f32, reduces the new maxima, and encodes each moment to its nearest code
/// (a binary search over the codes sorted by value, built in shared memory
/// as the CPU builds its table).
constexpr int kMaxQuantBlock = 4096;
/// Quantization block b of one tensor (the thread block's share).
__device__ void
adam8bitBlock(int64_t b, int64_t n, int64_t blockSize, const float *param,
              const float *grad, const uint8_t *mCodes, const float *mMax,
              const uint8_t *vCodes, const float *vMax, float *newParam,
              uint8_t *newMCodes, float *newMMax, uint8_t *newVCodes,
              float *newVMax, const float *lrPtr, const int64_t *stepPtr,
              double beta1, double beta2, double eps, double weightDecay,
              const float *skip, const float *clip) {
  __shared__ float moments[2 * kMaxQuantBlock];
  __shared__ float value[2][256], sorted[2][256];
  __shared__ uint8_t sortedCode[2][256];
  __syncthreads(); // the previous block's tables may still be read
  int64_t begin = b * blockSize;
  int64_t end = begin + blockSize < n ? begin + blockSize : n;
  if (skip && *skip != 0.0f) {
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      newParam[i] = param[i];
      newMCodes[i] = mCodes[i];
      newVCodes[i] = vCodes[i];
    }
    if (threadIdx.x == 0) {
      newMMax[b] = mMax[b];
      newVMax[b] = vMax[b];
    }
    return;
  }
  for (int c = threadIdx.x; c < 256; c += blockDim.x) {
    value[0][c] = optimizers::decodeCode(unsigned(c), true);
    value[1][c] = optimizers::decodeCode(unsigned(c), false);
  }
  __syncthreads();
  // Rank each code by (value, code); signed 0x80 (-0) is left out.
  for (int c = threadIdx.x; c < 256; c += blockDim.x)
    for (int map = 0; map < 2; ++map) {
      if (map == 0 && c == 0x80)
        continue;
      int rank = 0;
      for (int d = 0; d < 256; ++d) {
        if (map == 0 && d == 0x80)
          continue;
        float vd = value[map][d], vc = value[map][c];
        rank += vd < vc || (vd == vc && d < c);
      }
      sorted[map][rank] = value[map][c];
      sortedCode[map][rank] = uint8_t(c);
    }
  float lr = *lrPtr;
  int64_t step = *stepPtr;
  const optimizers::AdamScalars s = optimizers::adamScalars(
      double(lr), double(step), beta1, beta2, eps, weightDecay);
  float mLargest = 0.0f, vLargest = 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float g = clip ? grad[i] * *clip : grad[i];
    float m = value[0][mCodes[i]] * mMax[b];
    float v = value[1][vCodes[i]] * vMax[b];
    float p = param[i];
    optimizers::adamStep(s, /*decoupled=*/true, p, g, m, v);
    newParam[i] = p;
    moments[i - begin] = m;
    moments[kMaxQuantBlock + (i - begin)] = v;
    mLargest = fmaxf(mLargest, fabsf(m));
    vLargest = fmaxf(vLargest, v);
  }
  __syncthreads(); // the tables, before the searches below
  mLargest = blockMax(mLargest);
  vLargest = blockMax(vLargest);
  auto nearest = [&](int map, float x) {
    int size = map == 0 ? 255 : 256, lo = 0, hi = size;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (sorted[map][mid] < x)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == 0)
      return sortedCode[map][0];
    if (lo == size)
      return sortedCode[map][size - 1];
    return x - sorted[map][lo - 1] <= sorted[map][lo] - x
               ? sortedCode[map][lo - 1]
               : sortedCode[map][lo];
  };
  float mInverse = mLargest > 0.0f ? 1.0f / mLargest : 0.0f;
  float vInverse = vLargest > 0.0f ? 1.0f / vLargest : 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    newMCodes[i] = nearest(0, moments[i - begin] * mInverse);
    newVCodes[i] = nearest(1, moments[kMaxQuantBlock + (i - begin)] * vInverse);
  }
  if (threadIdx.x == 0) {
    newMMax[b] = mLargest;
    newVMax[b] = vLargest;
  }
}

/// One tensor of an adamw8bit group: its operands and results in the
/// regions, its elements and the first of its quantization blocks in the
/// group's.
struct Adam8bitTensor {
  TensorRef param, grad, mCodes, mMax, vCodes, vMax, newParam, newMCodes,
      newMMax, newVCodes, newVMax;
  int64_t elements, firstBlock;
};

/// Every tensor of the group in one launch: thread block g of the grid
/// takes the group's quantization blocks g, g + gridDim.x, ... `clip` (or
/// null) scales each gradient as it is read, as in adamMultiTensor.
__device__ void adam8bitMultiTensor(const Regions &r,
                                    const Adam8bitTensor *tensors, int count,
                                    int64_t totalBlocks, int64_t blockSize,
                                    const float *lrPtr, const int64_t *stepPtr,
                                    double beta1, double beta2, double eps,
                                    double weightDecay, const float *skip,
                                    const float *clip) {
  for (int64_t g = blockIdx.x; g < totalBlocks; g += gridDim.x) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (tensors[mid].firstBlock <= g)
        lo = mid;
      else
        hi = mid - 1;
    }
    const Adam8bitTensor &t = tensors[lo];
    auto f = [&](const TensorRef &ref) {
      return reinterpret_cast<float *>(regionBase(r, ref.region) + ref.offset);
    };
    auto u8 = [&](const TensorRef &ref) {
      return regionBase(r, ref.region) + ref.offset;
    };
    adam8bitBlock(g - t.firstBlock, t.elements, blockSize, f(t.param),
                  f(t.grad), u8(t.mCodes), f(t.mMax), u8(t.vCodes), f(t.vMax),
                  f(t.newParam), u8(t.newMCodes), f(t.newMMax), u8(t.newVCodes),
                  f(t.newVMax), lrPtr, stepPtr, beta1, beta2, eps, weightDecay,
                  skip, clip);
  }
}

} // namespace mnemo::cuda

#endif // MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSKERNELS_CUH
