//===- Tensor.cpp - Host tensors for the reference interpreter ------------===//

#include "lang/interpreter/Tensor.h"

#include <cmath>
#include <cstring>

using namespace mnemo;

/// f32 -> bf16, round to nearest even on the bit pattern (bf16 is the top
/// half of an f32), as PyTorch and the hardware convert.
static double roundToBF16(float value) {
  if (std::isnan(value))
    return value;
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t lsb = (bits >> 16) & 1;
  bits += 0x7FFF + lsb; // carries into the exponent: overflow becomes inf
  bits &= 0xFFFF0000u;
  float result;
  std::memcpy(&result, &bits, 4);
  return result;
}

/// f32 -> f16, round to nearest even, with f16's subnormals (down to 2^-24)
/// and overflow to infinity above 65504.
static double roundToF16(float value) {
  if (std::isnan(value) || value == 0 || std::isinf(value))
    return value;
  int exp;
  std::frexp(value, &exp); // value = m * 2^exp with 0.5 <= |m| < 1
  const int minExp = -13;  // frexp exponent of the smallest normal, 2^-14
  const int precision = 11;
  int scaleExp = std::max(exp, minExp) - precision;
  double rounded = std::nearbyint(std::ldexp(double(value), -scaleExp));
  double result = std::ldexp(rounded, scaleExp);
  if (std::fabs(result) > 65504.0)
    return std::copysign(INFINITY, double(value));
  return result;
}

double mnemo::roundTo(ElementType type, double value) {
  switch (type) {
  case ElementType::F32:
    return double(float(value));
  // Narrow floats are computed in f32 and then rounded, as hardware does.
  case ElementType::BF16:
    return roundToBF16(float(value));
  case ElementType::F16:
    return roundToF16(float(value));
  case ElementType::I64: // a step: exact in a double up to 2^53
    return std::isfinite(value) ? std::trunc(value) : 0;
  case ElementType::I32:
    return std::isfinite(value) ? double(int32_t(int64_t(std::trunc(value))))
                                : 0;
  case ElementType::I16:
    return std::isfinite(value) ? double(int16_t(int64_t(std::trunc(value))))
                                : 0;
  case ElementType::I8:
    return std::isfinite(value) ? double(int8_t(int64_t(std::trunc(value))))
                                : 0;
  case ElementType::I1:
    return value != 0 ? 1 : 0;
  }
  return value;
}

Tensor::Tensor(ElementType type, std::vector<int64_t> shape, double fill)
    : type(type), shape(std::move(shape)) {
  int64_t n = 1;
  for (int64_t d : this->shape)
    n *= d;
  data.assign(n, fill);
}

Tensor mnemo::permute(const Tensor &x, const std::vector<int64_t> &permutation,
                      Tensor out) {
  std::vector<int64_t> inStrides = x.strides();
  IndexCounter it(out.shape);
  for (int64_t flat = 0; flat < out.numElements(); ++flat, it.next()) {
    int64_t source = 0;
    for (size_t i = 0; i < permutation.size(); ++i)
      source += it.index[i] * inStrides[permutation[i]];
    out.data[flat] = x.data[source];
  }
  return out;
}

std::vector<int64_t> Tensor::strides() const {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

std::string Tensor::typeString() const {
  std::string s = std::string(spell(type)) + "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}
