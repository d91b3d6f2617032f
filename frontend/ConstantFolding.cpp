//===- ConstantFolding.cpp - Tables computed at compile time --------------===//
//
// An op whose operands are all constants (arange, a number, a folded table)
// is evaluated here, when the model is elaborated, and becomes a constant:
// RoPE's cos/sin tables, an ALiBi slope table, a positional encoding are
// computed once by the compiler and baked into the program as read-only
// data, not recomputed by every step. Each op is evaluated in double and
// its result rounded to its element type, so a folded table is what the
// op-by-op f32 computation would give with correctly rounded ops (PyTorch's
// f32 kernels round exp, sin and cos to within an ulp of the same values).
//
// Folded: elementwise unary and binary ops (operands of one shape, as the
// frontend makes every broadcast explicit), reshape, broadcast, transpose
// and concat. Anything else is emitted as an op.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaInternal.h"

#include <cmath>

using namespace mnemo;
using namespace mnemo::sema;

namespace {

/// Elements of a shape (beyond kMaxElements: more than anything folds).
int64_t elements(const shape::Shape &shape) {
  return shape::numElements(shape).value_or(INT64_MAX);
}

/// `value` as its element type holds it.
double roundTo(ElementType type, double value) {
  switch (type) {
  case ElementType::F32:
    return double(float(value));
  case ElementType::I32:
    return double(int32_t(value));
  case ElementType::I8:
    return double(int8_t(value));
  default:
    return value; // f16 and bf16 tables are not folded (foldable() below)
  }
}

const AttrValue *attr(const std::vector<NamedAttr> &attrs,
                      llvm::StringRef name) {
  for (const NamedAttr &a : attrs)
    if (a.name == name)
      return &a.value;
  return nullptr;
}

std::optional<double> unaryOp(llvm::StringRef op, double x) {
  if (op == "neg")
    return -x;
  if (op == "exp")
    return std::exp(x);
  if (op == "log")
    return std::log(x);
  if (op == "sqrt")
    return std::sqrt(x);
  if (op == "rsqrt")
    return 1.0 / std::sqrt(x);
  if (op == "tanh")
    return std::tanh(x);
  if (op == "sigmoid")
    return 1.0 / (1.0 + std::exp(-x));
  if (op == "sin")
    return std::sin(x);
  if (op == "cos")
    return std::cos(x);
  return std::nullopt;
}

std::optional<double> binaryOp(llvm::StringRef op, double a, double b,
                               bool integer) {
  if (op == "add")
    return a + b;
  if (op == "sub")
    return a - b;
  if (op == "mul")
    return a * b;
  if (op == "div") {
    if (!integer)
      return a / b;
    if (b == 0)
      return std::nullopt; // left to the op (and its kernel's behaviour)
    return std::trunc(a / b);
  }
  return std::nullopt;
}

} // namespace

std::optional<std::vector<double>> mnemo::sema::foldConstant(
    llvm::StringRef op, const std::vector<const std::vector<double> *> &in,
    const std::vector<TensorType> &inTypes, const TensorType &result,
    const std::vector<NamedAttr> &attrs) {
  if (result.dtype != ElementType::F32 && result.dtype != ElementType::I32)
    return std::nullopt;
  int64_t n = elements(result.shape);
  std::vector<double> out;
  out.reserve(n);
  bool integer = result.dtype == ElementType::I32;

  if (in.size() == 1 && inTypes[0].shape == result.shape &&
      inTypes[0].dtype == result.dtype) {
    if (op == "reshape")
      return *in[0];
    for (double x : *in[0]) {
      std::optional<double> y = integer ? std::nullopt : unaryOp(op, x);
      if (!y)
        return std::nullopt;
      out.push_back(roundTo(result.dtype, *y));
    }
    return out;
  }
  if (op == "reshape" && in.size() == 1 && elements(inTypes[0].shape) == n &&
      inTypes[0].dtype == result.dtype)
    return *in[0];
  if (in.size() == 2 && inTypes[0] == result && inTypes[1] == result) {
    for (int64_t i = 0; i < n; ++i) {
      std::optional<double> y = binaryOp(op, (*in[0])[i], (*in[1])[i], integer);
      if (!y)
        return std::nullopt;
      out.push_back(roundTo(result.dtype, *y));
    }
    return out;
  }
  if (op == "broadcast" && in.size() == 1) {
    // numpy's broadcast_to: dimensions aligned from the right, size-1 ones
    // stretched.
    const shape::Shape &from = inTypes[0].shape;
    size_t lead = result.shape.size() - from.size();
    std::vector<int64_t> fromStrides = shape::rowMajorStrides(from);
    std::vector<int64_t> outStrides = shape::rowMajorStrides(result.shape);
    for (int64_t i = 0; i < n; ++i) {
      int64_t source = 0;
      for (size_t d = lead; d < result.shape.size(); ++d) {
        int64_t index = (i / outStrides[d]) % result.shape[d];
        if (from[d - lead] != 1)
          source += index * fromStrides[d - lead];
      }
      out.push_back((*in[0])[source]);
    }
    return out;
  }
  if (op == "transpose" && in.size() == 1) {
    const auto *perm = attr(attrs, "permutation");
    if (!perm || !std::holds_alternative<std::vector<int64_t>>(*perm))
      return std::nullopt;
    const auto &order = std::get<std::vector<int64_t>>(*perm);
    std::vector<int64_t> fromStrides = shape::rowMajorStrides(inTypes[0].shape);
    std::vector<int64_t> outStrides = shape::rowMajorStrides(result.shape);
    for (int64_t i = 0; i < n; ++i) {
      int64_t source = 0;
      for (size_t d = 0; d < result.shape.size(); ++d)
        source +=
            ((i / outStrides[d]) % result.shape[d]) * fromStrides[order[d]];
      out.push_back((*in[0])[source]);
    }
    return out;
  }
  if (op == "concat") {
    const auto *axisAttr = attr(attrs, "axis");
    if (!axisAttr || !std::holds_alternative<int64_t>(*axisAttr))
      return std::nullopt;
    int64_t axis = std::get<int64_t>(*axisAttr);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= result.shape[d];
    for (size_t d = axis + 1; d < result.shape.size(); ++d)
      inner *= result.shape[d];
    for (int64_t o = 0; o < outer; ++o)
      for (size_t k = 0; k < in.size(); ++k) {
        int64_t rows = inTypes[k].shape[axis] * inner;
        out.insert(out.end(), in[k]->begin() + o * rows,
                   in[k]->begin() + (o + 1) * rows);
      }
    return out;
  }
  return std::nullopt;
}
