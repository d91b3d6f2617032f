//===- AdamRules.h - Adam(W)'s arithmetic, as torch.optim computes it -----===//
//
// The one definition of an Adam(W) step's f32 arithmetic, shared by the CPU
// kernels, the CUDA kernels and adamw8bit (runtime/Quantize8.h); NVRTC gets
// this file spliced into the kernel library by MnemoCuda.cmake, so it
// includes nothing.
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

#ifndef MNEMO_RUNTIME_ADAMRULES_H
#define MNEMO_RUNTIME_ADAMRULES_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MNEMO_ADAM_HD __host__ __device__
#define MNEMO_ADAM_SQRTF(x) sqrtf(x)
#define MNEMO_ADAM_SQRT(x) sqrt(x)
#define MNEMO_ADAM_POW(x, y) pow(x, y)
#else
#define MNEMO_ADAM_HD
#define MNEMO_ADAM_SQRTF(x) __builtin_sqrtf(x)
#define MNEMO_ADAM_SQRT(x) __builtin_sqrt(x)
#define MNEMO_ADAM_POW(x, y) __builtin_pow(x, y)
#endif

namespace mnemo {
namespace adam {

/// One step's scalars, computed in double and rounded once each.
struct Scalars {
  float stepSize;      // lr / (1 - beta1^step)
  float bias2Sqrt;     // sqrt(1 - beta2^step)
  float decay;         // 1 - lr * weight_decay (AdamW's decoupled decay)
  float beta2;         // exp_avg_sq.mul_(beta2)
  float oneMinusBeta1; // exp_avg.lerp_(grad, 1 - beta1)
  float oneMinusBeta2; // addcmul_(grad, grad, value=1 - beta2)
  float eps;
  float weightDecay; // Adam's L2 term, grad + weight_decay * param
};

MNEMO_ADAM_HD inline Scalars scalars(double lr, double step, double beta1,
                                     double beta2, double eps,
                                     double weightDecay) {
  Scalars s;
  s.stepSize = float(lr / (1.0 - MNEMO_ADAM_POW(beta1, step)));
  s.bias2Sqrt = float(MNEMO_ADAM_SQRT(1.0 - MNEMO_ADAM_POW(beta2, step)));
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
MNEMO_ADAM_HD inline void update(const Scalars &s, bool decoupled, float &param,
                                 float grad, float &expAvg, float &expAvgSq) {
  float p = param, g = grad;
  if (decoupled)
    p *= s.decay;
  else if (s.weightDecay != 0.0f)
    g += s.weightDecay * p;
  float m = expAvg + (g - expAvg) * s.oneMinusBeta1;
  float v = expAvgSq * s.beta2 + s.oneMinusBeta2 * g * g;
  float denom = MNEMO_ADAM_SQRTF(v) / s.bias2Sqrt + s.eps;
  param = p - s.stepSize * (m / denom);
  expAvg = m;
  expAvgSq = v;
}

} // namespace adam
} // namespace mnemo

#endif // MNEMO_RUNTIME_ADAMRULES_H
