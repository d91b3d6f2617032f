//===- FakeQuantRules.h - Quantization parameters and fake quantization ---===//
//
// The one definition of quantization-aware training's arithmetic, shared by
// the reference interpreter, the CPU kernels and the CUDA kernels (NVRTC
// gets this file spliced into the kernel library by MnemoCuda.cmake, so it
// includes nothing). It is PyTorch's, in f32:
// torch.ao.quantization's _calculate_qparams for the scale and zero point,
// and fake_quantize_per_{tensor,channel}_affine's forward and clipped
// straight-through backward, rounding half to even.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_FAKEQUANTRULES_H
#define MNEMO_RUNTIME_FAKEQUANTRULES_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MNEMO_FQ_HD __host__ __device__
#define MNEMO_FQ_RINT(x) nearbyintf(x)
#else
#define MNEMO_FQ_HD
#define MNEMO_FQ_RINT(x) __builtin_nearbyintf(x)
#endif

namespace mnemo {
namespace fakequant {

struct QParams {
  float scale;
  float zeroPoint; // an integer, kept as float for the arithmetic
};

/// The scale and zero point of an observed range [lo, hi] for integers in
/// [qmin, qmax]: the range is widened to hold 0; the scale is at least
/// f32's epsilon (PyTorch's eps).
MNEMO_FQ_HD inline QParams qparams(float lo, float hi, int qmin, int qmax,
                                   bool symmetric) {
  const float eps = 1.1920928955078125e-07f;
  float minNeg = lo < 0.0f ? lo : 0.0f;
  float maxPos = hi > 0.0f ? hi : 0.0f;
  QParams q;
  if (symmetric) {
    float largest = -minNeg > maxPos ? -minNeg : maxPos;
    q.scale = largest / (float(qmax - qmin) / 2.0f);
    q.scale = q.scale > eps ? q.scale : eps;
    q.zeroPoint = 0.0f;
  } else {
    q.scale = (maxPos - minNeg) / float(qmax - qmin);
    q.scale = q.scale > eps ? q.scale : eps;
    float zp = float(qmin) - MNEMO_FQ_RINT(minNeg / q.scale);
    q.zeroPoint = zp < float(qmin) ? float(qmin)
                                   : (zp > float(qmax) ? float(qmax) : zp);
  }
  return q;
}

/// The integer `x` rounds to, before clamping.
MNEMO_FQ_HD inline float quantized(float x, QParams q) {
  return MNEMO_FQ_RINT(x * (1.0f / q.scale)) + q.zeroPoint;
}

/// `x` quantized to [qmin, qmax] and back.
MNEMO_FQ_HD inline float fakeQuant(float x, QParams q, int qmin, int qmax) {
  float v = quantized(x, q);
  v = v < float(qmin) ? float(qmin) : (v > float(qmax) ? float(qmax) : v);
  return (v - q.zeroPoint) * q.scale;
}

/// Whether the straight-through gradient passes at `x`.
MNEMO_FQ_HD inline bool passesGradient(float x, QParams q, int qmin,
                                       int qmax) {
  float v = quantized(x, q);
  return v >= float(qmin) && v <= float(qmax);
}

/// An observer's new bound: the bound seen at the first step; after, the
/// running extreme (averaging 0; `lower` picks the minimum) or the moving
/// average old + c * (seen - old).
MNEMO_FQ_HD inline float observe(float old, float seen, bool first,
                                 float averaging, bool lower) {
  if (first)
    return seen;
  if (averaging == 0.0f)
    return lower ? (seen < old ? seen : old) : (seen > old ? seen : old);
  return old + averaging * (seen - old);
}

} // namespace fakequant
} // namespace mnemo

#endif // MNEMO_RUNTIME_FAKEQUANTRULES_H
