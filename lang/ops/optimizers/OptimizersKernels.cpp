//===- OptimizersKernels.cpp - The optimizer on the CPU -------------------===//
//
// The optimizer's CPU kernels: elementwise updates split over the threads,
// the global norm in a fixed number of chunks per tensor (deterministic for
// a thread count), adamw8bit one quantization block per task.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/optimizers/OptimizersKernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mnemo::cpu {

float lrSchedule(bool cosine, int64_t step, int64_t totalSteps, double baseLr,
                 int64_t warmup, int64_t steps, double minLr) {
  double total = steps > 0 ? double(steps) : double(totalSteps);
  return float(optimizers::learningRate(cosine, double(step), total, baseLr,
                                        double(warmup), minLr));
}

float globalNorm(const float *const *tensors, const int64_t *sizes, int count) {
  return float(std::sqrt(sumOfSquares(tensors, sizes, count)));
}

double sumOfSquares(const float *const *tensors, const int64_t *sizes,
                    int count) {
  // Each tensor in a fixed number of chunks (a function of its size and
  // the thread count only), summed in chunk order: deterministic.
  double total = 0;
  constexpr int64_t kMaxChunks = 64;
  double partial[kMaxChunks];
  for (int t = 0; t < count; ++t) {
    const float *x = tensors[t];
    int64_t n = sizes[t];
    int64_t chunks = std::min<int64_t>(
        {kMaxChunks, int64_t(threads()), std::max<int64_t>(1, n / kGrain)});
    parallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        double s = 0;
        for (int64_t i = n * c / chunks; i < n * (c + 1) / chunks; ++i)
          s += double(x[i]) * double(x[i]);
        partial[c] = s;
      }
    });
    for (int64_t c = 0; c < chunks; ++c)
      total += partial[c];
  }
  return total;
}

void lossScaleUpdate(float norm, float scale, float count, float *newScale,
                     float *newCount, float *skip, double growthFactor,
                     double backoffFactor, int64_t growthInterval) {
  optimizers::LossScale next =
      optimizers::nextLossScale(std::isfinite(norm), scale, count, growthFactor,
                                backoffFactor, growthInterval);
  *newScale = next.scale;
  *newCount = next.count;
  *skip = next.skip;
}

void adamUpdate(int64_t n, const float *param, const float *grad,
                const float *expAvg, const float *expAvgSq, float *newParam,
                float *newExpAvg, float *newExpAvgSq, float lr, int64_t step,
                double beta1, double beta2, double eps, double weightDecay,
                bool decoupled, const float *skip) {
  if (skip && *skip != 0.0f) {
    // An overflowed f16 step: everything stays (copied when not in place).
    for (auto [from, to] : {std::pair<const float *, float *>{param, newParam},
                            {expAvg, newExpAvg},
                            {expAvgSq, newExpAvgSq}})
      if (from != to)
        std::memcpy(to, from, sizeof(float) * n);
    return;
  }
  // torch.optim.AdamW's single-tensor arithmetic (OptimizersFormulas.h).
  optimizers::AdamScalars s = optimizers::adamScalars(
      double(lr), double(step), beta1, beta2, eps, weightDecay);
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float p = param[i], m = expAvg[i], v = expAvgSq[i];
      optimizers::adamStep(s, decoupled, p, grad[i], m, v);
      newParam[i] = p;
      newExpAvg[i] = m;
      newExpAvgSq[i] = v;
    }
  });
}

void adam8bitUpdate(int64_t n, int64_t block, const float *param,
                    const float *grad, const uint8_t *expAvgCodes,
                    const float *expAvgMax, const uint8_t *expAvgSqCodes,
                    const float *expAvgSqMax, float *newParam,
                    uint8_t *newExpAvgCodes, float *newExpAvgMax,
                    uint8_t *newExpAvgSqCodes, float *newExpAvgSqMax, float lr,
                    int64_t step, double beta1, double beta2, double eps,
                    double weightDecay, const float *skip) {
  int64_t blocks = quant8::blockCount(n, block);
  if (skip && *skip != 0.0f) {
    auto copy = [](const void *from, void *to, size_t bytes) {
      if (from != to)
        std::memcpy(to, from, bytes);
    };
    copy(param, newParam, sizeof(float) * n);
    copy(expAvgCodes, newExpAvgCodes, n);
    copy(expAvgSqCodes, newExpAvgSqCodes, n);
    copy(expAvgMax, newExpAvgMax, sizeof(float) * blocks);
    copy(expAvgSqMax, newExpAvgSqMax, sizeof(float) * blocks);
    return;
  }
  // Blocks are independent: each thread takes whole blocks.
  parallelFor(blocks, 1, [&](int64_t first, int64_t last) {
    int64_t begin = first * block, end = std::min(n, last * block);
    quant8::adamw8bitStep(
        end - begin, block, param + begin, grad + begin, expAvgCodes + begin,
        expAvgMax + first, expAvgSqCodes + begin, expAvgSqMax + first,
        newParam + begin, newExpAvgCodes + begin, newExpAvgMax + first,
        newExpAvgSqCodes + begin, newExpAvgSqMax + first, lr, step, beta1,
        beta2, eps, weightDecay);
  });
}

void sgdUpdate(int64_t n, const float *param, const float *grad,
               const float *buffer, float *newParam, float *newBuffer, float lr,
               int64_t step, double momentum, double dampening,
               double weightDecay, bool nesterov, const float *skip) {
  if (skip && *skip != 0.0f) {
    if (param != newParam)
      std::memcpy(newParam, param, sizeof(float) * n);
    if (newBuffer != buffer)
      std::memcpy(newBuffer, buffer, sizeof(float) * n);
    return;
  }
  float mu = float(momentum), damp = float(1.0 - dampening),
        wd = float(weightDecay);
  parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float d = wd != 0.0f ? grad[i] + wd * param[i] : grad[i];
      if (mu != 0.0f) {
        float b = step <= 1 ? d : mu * buffer[i] + damp * d;
        newBuffer[i] = b;
        d = nesterov ? d + mu * b : b;
      } else if (newBuffer != buffer) {
        newBuffer[i] = buffer[i];
      }
      newParam[i] = param[i] - lr * d;
    }
  });
}

} // namespace mnemo::cpu
