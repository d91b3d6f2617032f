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

#include "lang/ElementType.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mnemo {

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
  /// Rows (the leading dimensions) and depth (the last) of a `[..., K]`
  /// operand, as the row-wise products see it.
  std::pair<int64_t, int64_t> rowsAndDepth() const {
    int64_t k = rank() ? shape.back() : 1;
    return {numElements() / (k > 0 ? k : 1), k};
  }
};

/// Iterates a row-major multi-index over `shape`.
struct IndexCounter {
  explicit IndexCounter(const std::vector<int64_t> &shape)
      : shape(shape), index(shape.size(), 0) {}
  void next() {
    for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
      if (++index[i] < shape[i])
        return;
      index[i] = 0;
    }
  }
  const std::vector<int64_t> &shape;
  std::vector<int64_t> index;
};

/// `x` with its dimensions permuted into `out` (of the permuted shape):
/// out's dimension i is x's dimension permutation[i].
Tensor permute(const Tensor &x, const std::vector<int64_t> &permutation,
               Tensor out);

} // namespace mnemo

#endif // MNEMO_LANG_INTERPRETER_TENSOR_H
