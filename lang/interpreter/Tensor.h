//===- Tensor.h - Host tensors for the reference interpreter ----*- C++ -*-===//
//
// A tensor as the reference interpreter sees it: an element type, a shape and
// the values as doubles. Storing every element type as double keeps the
// interpreter simple; rounding to the declared type (f32, bf16, f16, with
// round-to-nearest-even) happens after every op, so results are exactly
// what a machine computing in that type, with wide intermediates, produces.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_INTERPRETER_TENSOR_H
#define MNEMO_LANG_INTERPRETER_TENSOR_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mnemo {

enum class ElementType { F32, F16, BF16, I32, I8, I1 };

const char *spell(ElementType type);
std::optional<ElementType> parseElementType(const std::string &name);
inline bool isFloat(ElementType t) {
  return t == ElementType::F32 || t == ElementType::F16 || t == ElementType::BF16;
}
/// Bytes per element when stored (i1 as one byte).
int64_t byteWidth(ElementType type);

/// `value` rounded to the nearest `type` value, ties to even (integers
/// truncate toward zero and wrap like a C cast).
double roundTo(ElementType type, double value);

struct Tensor {
  ElementType type = ElementType::F32;
  std::vector<int64_t> shape;
  std::vector<double> data;

  Tensor() = default;
  Tensor(ElementType type, std::vector<int64_t> shape, double fill = 0.0);

  int64_t numElements() const { return int64_t(data.size()); }
  int64_t rank() const { return int64_t(shape.size()); }
  /// Row-major strides, in elements.
  std::vector<int64_t> strides() const;
  /// "f32[2,3]".
  std::string typeString() const;
};

} // namespace mnemo

#endif // MNEMO_LANG_INTERPRETER_TENSOR_H
