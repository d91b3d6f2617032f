//===- ElementwiseFormulas.h - What each elementwise op does ----*- C++ -*-===//
//
// The one statement of every elementwise op's scalar formula (and of the
// backward ops' that gradient rules emit). Everything that computes one uses
// this file:
// - the reference interpreter, in double with the C library's functions
//   (ElementwiseInterpreter.cpp's ExactMath);
// - the CPU backend's fused loops, in f32 with FastMath below;
// - the CUDA kernels, in f32 with FastMath: NVRTC gets this file spliced into
//   its kernel library (runtime/cuda/MnemoCuda.cmake), and the test suite's
//   CUDA emulator compiles it as host C++.
// The fused-loop emitters render an op as `mnemo::elementwise::NAME(operands,
// constants)` (ElementwiseEmission.cpp), so a formula here is all of an op's
// code generation on both backends.
//
// A formula is a template over the element type T, which the generated code
// deduces from its f32 operands, and a math policy M, FastMath unless the
// caller says otherwise. An op's constants (gelu's `approximate`, softplus's
// beta and threshold) are T arguments that the emitters pass as literals, so
// the C++ compilers fold the branches on them.
//
// It includes nothing: NVRTC compiles without a C++ standard library.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_ELEMENTWISE_ELEMENTWISEFORMULAS_H
#define MNEMO_LANG_OPS_ELEMENTWISE_ELEMENTWISEFORMULAS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MNEMO_FORMULA __host__ __device__ __forceinline__
#define MNEMO_MATHF(fn, ...) fn##f(__VA_ARGS__)
#else
#define MNEMO_FORMULA inline
#define MNEMO_MATHF(fn, ...) __builtin_##fn##f(__VA_ARGS__)
#endif

namespace mnemo::elementwise {

/// e^x in f32 to about 1 ulp, written without calls or branches so that
/// loops over it vectorize (the C library's expf does not, short of
/// -ffast-math): x = n ln2 + r with |r| <= ln2/2, e^r by Cephes' minimax
/// polynomial, 2^n by building the exponent bits. Below -87.3 (where e^x
/// leaves f32's normal range) the result is 0, exactly: e^-inf of a masked
/// attention score must be 0, not a subnormal 1e-38 that every later
/// multiply then runs through slowly. Above ln(FLT_MAX) it is infinity,
/// and a NaN stays NaN.
MNEMO_FORMULA float fastExp(float x) {
  float in = x;
  // Written so that a NaN clamps too (to -87.3): converting a NaN to int
  // below would be undefined behaviour. The result is `in` then.
  x = x > -87.3f ? x : -87.3f;
  x = x < 88.7f ? x : 88.7f;
  // n = round(x / ln2), by the 1.5 * 2^23 trick (exact for |n| < 2^22).
  float t = x * 1.44269504088896341f + 12582912.0f;
  float n = t - 12582912.0f;
  float r = x - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int bits = (int(n) + 127) << 23;
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
  float scale = __int_as_float(bits);
  const float infinity = __int_as_float(0x7f800000);
#else
  float scale;
  __builtin_memcpy(&scale, &bits, 4);
  const float infinity = __builtin_inff();
#endif
  float y = p * scale;
  y = in < -87.3f ? 0.0f : y;
  y = in > 88.7228394f ? infinity : y;
  return in != in ? in : y; // the clamps above may have replaced a NaN
}

/// tanh from fastExp: 1 - 2 / (e^2x + 1), exact in the limits (+-1) and
/// within a few 1e-8 of the true value near 0.
MNEMO_FORMULA float fastTanh(float x) {
  return 1.0f - 2.0f / (fastExp(2.0f * x) + 1.0f);
}

/// erf from fastExp, without calls or branches so that loops over it
/// vectorize (the exact GELU of BERT and ViT spent a quarter of a ViT step
/// in the C library's erff, one element at a time): 1 - erfc(|x|), signed,
/// with erfc(z) = t e^(-z^2 + P(t)), t = 1 / (1 + z/2), P the Chebyshev
/// fit of Numerical Recipes' erfcc (relative error of erfc below 1.2e-7).
/// Its absolute error is a few 1e-7, what GELU's 1 + erf needs; erf near
/// 0 is not to f32's relative precision. erf(+-inf) = +-1, NaN stays NaN.
MNEMO_FORMULA float fastErf(float x) {
  float z = x < 0.0f ? -x : x;
  float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  float r = 1.0f - t * fastExp(p - z * z);
  return x < 0.0f ? -r : r;
}

/// The backends' math: f32, with the vectorizable exp, tanh and erf above.
struct FastMath {
  static MNEMO_FORMULA float exp(float x) { return fastExp(x); }
  static MNEMO_FORMULA float tanh(float x) { return fastTanh(x); }
  static MNEMO_FORMULA float log(float x) { return MNEMO_MATHF(log, x); }
  static MNEMO_FORMULA float log1p(float x) { return MNEMO_MATHF(log1p, x); }
  static MNEMO_FORMULA float erf(float x) { return fastErf(x); }
  static MNEMO_FORMULA float sqrt(float x) { return MNEMO_MATHF(sqrt, x); }
  static MNEMO_FORMULA float sin(float x) { return MNEMO_MATHF(sin, x); }
  static MNEMO_FORMULA float cos(float x) { return MNEMO_MATHF(cos, x); }
  static MNEMO_FORMULA float pow(float x, float y) {
    return MNEMO_MATHF(pow, x, y);
  }
};

/// The splitmix64 finalizer: dropout masks are a pure function of (seed,
/// step, element), so the backward pass regenerates them, and every
/// implementation draws the same ones.
MNEMO_FORMULA unsigned long long mix64(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/// The dropout mask's uniform number in [0, 1) for (seed, step, element).
MNEMO_FORMULA double dropoutUniform(long long seed, long long step,
                                    long long index) {
  unsigned long long h =
      mix64(mix64(mix64((unsigned long long)seed) ^ (unsigned long long)step) ^
            (unsigned long long)index);
  return double(h >> 11) * 0x1.0p-53;
}

//===----------------------------------------------------------------------===//
// The formulas, one per op, named after the op's mnemonic
//===----------------------------------------------------------------------===//

template <typename T, typename M = FastMath> MNEMO_FORMULA T neg(T x) {
  return -x;
}
template <typename T, typename M = FastMath> MNEMO_FORMULA T exp(T x) {
  return M::exp(x);
}
template <typename T, typename M = FastMath> MNEMO_FORMULA T log(T x) {
  return M::log(x);
}
template <typename T, typename M = FastMath> MNEMO_FORMULA T sqrt(T x) {
  return M::sqrt(x);
}
template <typename T, typename M = FastMath> MNEMO_FORMULA T rsqrt(T x) {
  return T(1) / M::sqrt(x);
}
template <typename T, typename M = FastMath> MNEMO_FORMULA T tanh(T x) {
  return M::tanh(x);
}
template <typename T, typename M = FastMath> MNEMO_FORMULA T sigmoid(T x) {
  return T(1) / (T(1) + M::exp(-x));
}
template <typename T, typename M = FastMath> MNEMO_FORMULA T sin(T x) {
  return M::sin(x);
}
template <typename T, typename M = FastMath> MNEMO_FORMULA T cos(T x) {
  return M::cos(x);
}
/// x^c; the squares and square roots the models use are exact.
template <typename T, typename M = FastMath>
MNEMO_FORMULA T pow(T x, T exponent) {
  return exponent == T(2)     ? x * x
         : exponent == T(0.5) ? M::sqrt(x)
                              : M::pow(x, exponent);
}

/// PyTorch's NaN semantics: relu (like max and max_pool) propagates a NaN,
/// where `x > 0 ? x : 0` would turn it into 0; the gradient is PyTorch's
/// threshold_backward of the output y, `y <= 0 ? 0 : g` (y is positive, or
/// NaN, exactly where x is, so it is the gradient of the input's formula).
template <typename T, typename M = FastMath> MNEMO_FORMULA T relu(T x) {
  return x > T(0) || x != x ? x : T(0);
}
template <typename T, typename M = FastMath>
MNEMO_FORMULA T relu_grad(T grad, T y) {
  return y <= T(0) ? T(0) : grad;
}

template <typename T, typename M = FastMath> MNEMO_FORMULA T silu(T x) {
  return x * sigmoid<T, M>(x);
}
template <typename T, typename M = FastMath>
MNEMO_FORMULA T silu_grad(T grad, T x) {
  T s = sigmoid<T, M>(x);
  return grad * s * (T(1) + x * (T(1) - s));
}

/// x * Phi(x), with the exact normal CDF or, when `approximate` is set,
/// PyTorch's tanh form (GPT-2's).
template <typename T, typename M = FastMath>
MNEMO_FORMULA T gelu(T x, T approximate) {
  const T k = T(0.79788456080286536); // sqrt(2/pi)
  if (approximate != T(0))
    return T(0.5) * x * (T(1) + M::tanh(k * (x + T(0.044715) * x * x * x)));
  return T(0.5) * x * (T(1) + M::erf(x * T(0.70710678118654752)));
}
template <typename T, typename M = FastMath>
MNEMO_FORMULA T gelu_grad(T grad, T x, T approximate) {
  if (approximate != T(0)) {
    const T k = T(0.79788456080286536);
    T t = M::tanh(k * (x + T(0.044715) * x * x * x));
    return grad *
           (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k *
                                      (T(1) + T(3) * T(0.044715) * x * x));
  }
  T cdf = T(0.5) * (T(1) + M::erf(x * T(0.70710678118654752)));
  T pdf = M::exp(T(-0.5) * x * x) * T(0.39894228040143268); // 1/sqrt(2 pi)
  return grad * (cdf + x * pdf);
}

/// torch.nn.Softplus: log(1 + e^(beta x)) / beta, and x itself where beta x
/// exceeds the threshold (where the two agree to f32 and e^(beta x) would
/// overflow).
template <typename T, typename M = FastMath>
MNEMO_FORMULA T softplus(T x, T beta, T threshold) {
  return x * beta > threshold ? x : M::log1p(M::exp(x * beta)) / beta;
}
/// PyTorch's softplus_backward: grad * z / (z + 1) with z = e^(beta x), the
/// sigmoid of beta x; grad itself past the threshold.
template <typename T, typename M = FastMath>
MNEMO_FORMULA T softplus_grad(T grad, T x, T beta, T threshold) {
  T z = M::exp(x * beta);
  return x * beta > threshold ? grad : grad * z / (z + T(1));
}

} // namespace mnemo::elementwise

/// Every formula above: X(name, operands, constants). The reference
/// interpreter evaluates an op through this list, and the op-completeness
/// test requires a row for every op that declares a formula, with the
/// operand and constant counts its ODS entry has.
#define MNEMO_ELEMENTWISE_FORMULAS(X)                                          \
  X(neg, 1, 0)                                                                 \
  X(exp, 1, 0)                                                                 \
  X(log, 1, 0)                                                                 \
  X(sqrt, 1, 0)                                                                \
  X(rsqrt, 1, 0)                                                               \
  X(tanh, 1, 0)                                                                \
  X(sigmoid, 1, 0)                                                             \
  X(sin, 1, 0)                                                                 \
  X(cos, 1, 0)                                                                 \
  X(pow, 1, 1)                                                                 \
  X(relu, 1, 0)                                                                \
  X(relu_grad, 2, 0)                                                           \
  X(silu, 1, 0)                                                                \
  X(silu_grad, 2, 0)                                                           \
  X(gelu, 1, 1)                                                                \
  X(gelu_grad, 2, 1)                                                           \
  X(softplus, 1, 2)                                                            \
  X(softplus_grad, 2, 2)

#endif // MNEMO_LANG_OPS_ELEMENTWISE_ELEMENTWISEFORMULAS_H
