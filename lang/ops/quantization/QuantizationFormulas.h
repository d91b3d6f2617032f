//===- QuantizationFormulas.h - Quantization's arithmetic ------*- C++ -*-===//
//
// The trainer's definition of quantization-aware training's arithmetic,
// shared by the CPU kernels and the CUDA kernels; the reference interpreter
// has its own (QuantizationReference.h). NVRTC is given this file by name
// (runtime/cuda/MnemoCuda.cmake), so it includes nothing. It is PyTorch's, in
// f32: torch.ao.quantization's _calculate_qparams for the scale and zero point,
// and fake_quantize_per_{tensor,channel}_affine's forward and clipped
// straight-through backward, rounding half to even.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONFORMULAS_H
#define MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONFORMULAS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MNEMO_FQ_HD __host__ __device__
#define MNEMO_FQ_RINT(x) nearbyintf(x)
#else
#define MNEMO_FQ_HD
#define MNEMO_FQ_RINT(x) __builtin_nearbyintf(x)
#endif

namespace mnemo::fakequant {

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
    q.zeroPoint =
        zp < float(qmin) ? float(qmin) : (zp > float(qmax) ? float(qmax) : zp);
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
MNEMO_FQ_HD inline bool passesGradient(float x, QParams q, int qmin, int qmax) {
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

/// Inference's dynamic int8 activations (quantize_rows): a row's scale is
/// max|x| / 127 (1 for a row of zeros), its codes round(x / scale) in
/// [-127, 127], computed as x * (1 / scale) everywhere. A NaN or an
/// infinity counts as an infinite max|x|: the row's scale is infinite, its
/// codes 0 (NaN, from inf * 0, has code 0 too: converting it to int is
/// undefined), and each of its outputs 0 * inf = NaN, as in f32.
MNEMO_FQ_HD inline float rowScale(float absMax) {
  return absMax > 0.0f ? absMax / 127.0f : 1.0f;
}
MNEMO_FQ_HD inline int rowCode(float x, float inverseScale) {
  float v = MNEMO_FQ_RINT(x * inverseScale);
  if (v != v)
    return 0;
  return int(v < -127.0f ? -127.0f : (v > 127.0f ? 127.0f : v));
}

/// matmul_int8's epilogue: the exact int32 product of the codes, less the
/// weight's zero point times the row's code sum, in f32 units.
MNEMO_FQ_HD inline float int8Rescale(int acc, int zeroPoint, int rowSum,
                                     float rowScale, float channelScale) {
  return float(acc - zeroPoint * rowSum) * (rowScale * channelScale);
}

/// A stored code (int8, or a sign-extended nibble) back to f32.
MNEMO_FQ_HD inline float dequantized(int code, int zeroPoint, float scale) {
  return float(code - zeroPoint) * scale;
}
MNEMO_FQ_HD inline int int4Code(const signed char *packed, long long e) {
  int nibble = (int((unsigned char)packed[e / 2]) >> (4 * int(e % 2))) & 0xf;
  return nibble >= 8 ? nibble - 16 : nibble;
}

/// The position in its group of four of the `j`-th (0 or 1) kept value of
/// 2:4 group `g`, from the packed indices of its row.
MNEMO_FQ_HD inline int sparse24Position(const signed char *rowIndices,
                                        long long g, int j) {
  int byte = int((unsigned char)rowIndices[g / 2]) >> (4 * int(g % 2));
  return (byte >> (2 * j)) & 3;
}

} // namespace mnemo::fakequant

#endif // MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONFORMULAS_H
