//===- OptimizersFormulas.h - The optimizer's f32 arithmetic ----*- C++ -*-===//
//
// The one definition of the optimizer's arithmetic that the CPU kernels
// (OptimizersKernels.cpp) and the CUDA kernels (OptimizersKernels.cuh)
// share: the learning-rate schedule, f16 loss scaling, the clipping
// coefficient, an Adam(W) step, and the values of adamw8bit's 8-bit codes.
// NVRTC gets this file as a header of the kernel library
// (runtime/cuda/MnemoCuda.cmake), so it includes nothing. The reference
// interpreter has its own arithmetic in double (OptimizersInterpreter.cpp)
// and shares only the codes' values.
//
// torch.optim.Adam(W) computes its scalars in Python floats, i.e. in
// double: `1 - beta2`, `lr / (1 - beta1 ** step)`, `sqrt(1 - beta2 **
// step)` and `1 - lr * weight_decay` are each rounded to f32 once, where a
// tensor op takes them. Computing `1.0f - float(beta2)` instead gives
// 9.99987e-4 for beta2 = 0.999, a second moment 1.3e-5 too small at every
// step, which over 150 steps moves an MLP's parameters 75 times further
// from PyTorch's than PyTorch's own f32 is from its f64
// (test/reference/adamw-drift.test).
//
// The element update is torch >= 2.0's single-tensor AdamW:
//   param.mul_(1 - lr * weight_decay)                 (AdamW)
//   exp_avg.lerp_(grad, 1 - beta1)
//   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
//   denom = exp_avg_sq.sqrt() / bias_correction2_sqrt + eps
//   param.addcdiv_(exp_avg, denom, value=-step_size)
// (torch 1.13 spells the first moment `mul_(beta1).add_(grad, alpha=1 -
// beta1)`, which rounds differently in the last bit only.)
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSFORMULAS_H
#define MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSFORMULAS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MNEMO_OPTIMIZER_HD __host__ __device__
#define MNEMO_OPTIMIZER_SQRTF(x) sqrtf(x)
#define MNEMO_OPTIMIZER_SQRT(x) sqrt(x)
#define MNEMO_OPTIMIZER_POW(x, y) pow(x, y)
#define MNEMO_OPTIMIZER_COS(x) cos(x)
#else
#define MNEMO_OPTIMIZER_HD
#define MNEMO_OPTIMIZER_SQRTF(x) __builtin_sqrtf(x)
#define MNEMO_OPTIMIZER_SQRT(x) __builtin_sqrt(x)
#define MNEMO_OPTIMIZER_POW(x, y) __builtin_pow(x, y)
#define MNEMO_OPTIMIZER_COS(x) __builtin_cos(x)
#endif

namespace mnemo::optimizers {

/// The learning rate at `step` (from 1), in double as the schedule's
/// Python arithmetic: a linear warmup to `baseLr`, then flat or a cosine
/// decay to `minLr` at step `total`.
MNEMO_OPTIMIZER_HD inline double learningRate(bool cosine, double step,
                                              double total, double baseLr,
                                              double warmup, double minLr) {
  if (warmup > 0 && step <= warmup)
    return baseLr * step / warmup;
  if (!cosine)
    return baseLr;
  double span = total - warmup > 1.0 ? total - warmup : 1.0;
  double progress = (step - warmup) / span;
  progress = progress < 0.0 ? 0.0 : progress > 1.0 ? 1.0 : progress;
  return minLr +
         (baseLr - minLr) * 0.5 *
             (1.0 + MNEMO_OPTIMIZER_COS(3.14159265358979323846 * progress));
}

/// torch.cuda.amp.GradScaler.update: the next scale, the count of
/// consecutive finite steps (a whole number in a float), and whether this
/// step is skipped (1) or taken (0).
struct LossScale {
  float scale, count, skip;
};
MNEMO_OPTIMIZER_HD inline LossScale
nextLossScale(bool finite, float scale, float count, double growthFactor,
              double backoffFactor, long long growthInterval) {
  float next = finite ? count + 1.0f : 0.0f;
  float nextScale = finite ? scale : float(scale * backoffFactor);
  if (finite && next >= float(growthInterval)) {
    nextScale = float(scale * growthFactor);
    next = 0.0f;
  }
  return {nextScale, next, finite ? 0.0f : 1.0f};
}

/// clip_grad_norm_'s factor: max_norm / (norm + 1e-6), at most 1 (a NaN
/// norm gives NaN, as torch.clamp).
MNEMO_OPTIMIZER_HD inline float clipCoefficient(float norm, double maxNorm) {
  float coefficient = float(maxNorm) / (norm + 1e-6f);
  return 1.0f < coefficient ? 1.0f : coefficient;
}

/// One Adam(W) step's scalars, computed in double and rounded once each.
struct AdamScalars {
  float stepSize;      // lr / (1 - beta1^step)
  float bias2Sqrt;     // sqrt(1 - beta2^step)
  float decay;         // 1 - lr * weight_decay (AdamW's decoupled decay)
  float beta2;         // exp_avg_sq.mul_(beta2)
  float oneMinusBeta1; // exp_avg.lerp_(grad, 1 - beta1)
  float oneMinusBeta2; // addcmul_(grad, grad, value=1 - beta2)
  float eps;
  float weightDecay; // Adam's L2 term, grad + weight_decay * param
};

MNEMO_OPTIMIZER_HD inline AdamScalars adamScalars(double lr, double step,
                                                  double beta1, double beta2,
                                                  double eps,
                                                  double weightDecay) {
  AdamScalars s;
  s.stepSize = float(lr / (1.0 - MNEMO_OPTIMIZER_POW(beta1, step)));
  s.bias2Sqrt =
      float(MNEMO_OPTIMIZER_SQRT(1.0 - MNEMO_OPTIMIZER_POW(beta2, step)));
  s.decay = float(1.0 - lr * weightDecay);
  s.beta2 = float(beta2);
  s.oneMinusBeta1 = float(1.0 - beta1);
  s.oneMinusBeta2 = float(1.0 - beta2);
  s.eps = float(eps);
  s.weightDecay = float(weightDecay);
  return s;
}

/// One element: `param`, `expAvg` and `expAvgSq` are updated in place.
/// `decoupled` is AdamW (decay the parameter), else Adam (L2 on the
/// gradient).
MNEMO_OPTIMIZER_HD inline void adamStep(const AdamScalars &s, bool decoupled,
                                        float &param, float grad, float &expAvg,
                                        float &expAvgSq) {
  float p = param, g = grad;
  if (decoupled)
    p *= s.decay;
  else if (s.weightDecay != 0.0f)
    g += s.weightDecay * p;
  float m = expAvg + (g - expAvg) * s.oneMinusBeta1;
  float v = expAvgSq * s.beta2 + s.oneMinusBeta2 * g * g;
  float denom = MNEMO_OPTIMIZER_SQRTF(v) / s.bias2Sqrt + s.eps;
  param = p - s.stepSize * (m / denom);
  expAvg = m;
  expAvgSq = v;
}

/// The value of adamw8bit's `code`, in [-1, 1] (signed) or [0, 1]
/// (unsigned), Dettmers et al.'s dynamic ("tree") codes: after the sign bit
/// (signed codes), E zero bits, a one bit, and F fraction bits give 10^-E
/// times the F-bit midpoint between 0.1 and 1. Byte 0 is 0 in both maps.
MNEMO_OPTIMIZER_HD inline float decodeCode(unsigned code, bool isSigned) {
  const float kPowersOfTen[8] = {1.0f,  1e-1f, 1e-2f, 1e-3f,
                                 1e-4f, 1e-5f, 1e-6f, 1e-7f};
  int bits = isSigned ? 7 : 8;
  unsigned magnitude = isSigned ? (code & 0x7fu) : (code & 0xffu);
  float sign = isSigned && (code & 0x80u) ? -1.0f : 1.0f;
  if (magnitude == 0)
    return 0.0f;
  int highest = bits - 1;
  while (!(magnitude & (1u << highest)))
    --highest;
  int exponent = bits - 1 - highest; // the zeros before the one bit
  unsigned fraction = magnitude & ((1u << highest) - 1u);
  float linear =
      0.1f + 0.9f * ((float(fraction) + 0.5f) / float(1u << highest));
  return sign * linear * kPowersOfTen[exponent];
}

} // namespace mnemo::optimizers

#endif // MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSFORMULAS_H
