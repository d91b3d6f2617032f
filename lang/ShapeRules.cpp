//===- ShapeRules.cpp - Shape rules of the Mnemo op set -------------------===//

#include "lang/ShapeRules.h"

#include <algorithm>

namespace mnemo::shape {

static std::string str(int64_t v) { return std::to_string(v); }

std::string format(const Shape &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      out += ",";
    out += str(shape[i]);
  }
  return out + "]";
}

Shape rowMajorStrides(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::optional<int64_t> numElements(const Shape &shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d == 0)
      return 0;
    if (count > kMaxElements / d)
      return std::nullopt;
    count *= d;
  }
  return count;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

static std::string axisError(int64_t axis, size_t rank) {
  return "axis " + str(axis) + " is out of range for rank " + str(rank);
}

ShapeResult broadcast(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return ShapeResult::failure("dimensions " + str(da) + " and " + str(db) +
                                  " (axis " + str(int64_t(i) - int64_t(rank)) +
                                  ") do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return ShapeResult::success(out);
}

ShapeResult broadcastTo(const Shape &from, const Shape &to) {
  if (from.size() > to.size())
    return ShapeResult::failure("cannot broadcast rank " + str(from.size()) +
                                " down to rank " + str(to.size()));
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i])
      return ShapeResult::failure("dimension " + str(from[i]) +
                                  " does not broadcast to " +
                                  str(to[lead + i]));
  return ShapeResult::success(to);
}

/// The (rows, cols) of the last two dimensions after an optional transpose.
static std::pair<int64_t, int64_t> matrixDims(const Shape &s, bool transposed) {
  int64_t r = s[s.size() - 2], c = s[s.size() - 1];
  return transposed ? std::make_pair(c, r) : std::make_pair(r, c);
}

/// [..., M, K] x [..., K, N] -> [..., M, N] over the last two dimensions;
/// the caller checks the leading ones.
static ShapeResult contract(const Shape &lhs, const Shape &rhs,
                            bool transposeLhs, bool transposeRhs) {
  auto [m, k] = matrixDims(lhs, transposeLhs);
  auto [k2, n] = matrixDims(rhs, transposeRhs);
  if (k != k2)
    return ShapeResult::failure("inner dimensions " + str(k) + " and " +
                                str(k2) + " differ");
  Shape out(lhs.begin(), lhs.end() - 2);
  out.push_back(m);
  out.push_back(n);
  return ShapeResult::success(out);
}

ShapeResult matmul(const Shape &lhs, const Shape &rhs, bool transposeLhs,
                   bool transposeRhs) {
  if (lhs.size() < 2)
    return ShapeResult::failure("the left operand must have rank >= 2, not " +
                                str(lhs.size()));
  if (rhs.size() != 2)
    return ShapeResult::failure("the right operand must have rank 2, not " +
                                str(rhs.size()));
  return contract(lhs, rhs, transposeLhs, transposeRhs);
}

ShapeResult batchMatmul(const Shape &lhs, const Shape &rhs, bool transposeLhs,
                        bool transposeRhs) {
  if (lhs.size() < 3 || lhs.size() != rhs.size())
    return ShapeResult::failure(
        "batched operands must have the same rank >= 3, not " +
        str(lhs.size()) + " and " + str(rhs.size()));
  for (size_t i = 0; i + 2 < lhs.size(); ++i)
    if (lhs[i] != rhs[i])
      return ShapeResult::failure("batch dimensions " + str(lhs[i]) + " and " +
                                  str(rhs[i]) + " (axis " + str(i) +
                                  ") differ");
  return contract(lhs, rhs, transposeLhs, transposeRhs);
}

ShapeResult reduce(const Shape &input, const std::vector<int64_t> &axes,
                   bool keepDims) {
  std::vector<bool> reduced(input.size(), false);
  for (int64_t axis : axes) {
    auto a = normalizeAxis(axis, input.size());
    if (!a)
      return ShapeResult::failure(axisError(axis, input.size()));
    if (reduced[*a])
      return ShapeResult::failure("axis " + str(axis) + " is listed twice");
    reduced[*a] = true;
  }
  Shape out;
  for (size_t i = 0; i < input.size(); ++i) {
    if (!reduced[i])
      out.push_back(input[i]);
    else if (keepDims)
      out.push_back(1);
  }
  return ShapeResult::success(out);
}

ShapeResult reshape(const Shape &input, const Shape &requested) {
  auto inCount = numElements(input);
  if (!inCount)
    return ShapeResult::failure("the input shape is invalid");
  int inferredAt = -1;
  int64_t known = 1;
  for (size_t i = 0; i < requested.size(); ++i) {
    int64_t d = requested[i];
    if (d == -1) {
      if (inferredAt >= 0)
        return ShapeResult::failure("only one dimension may be -1");
      inferredAt = i;
      continue;
    }
    if (d < 0)
      return ShapeResult::failure("dimension " + str(d) + " is negative");
    if (d != 0 && known > kMaxElements / d)
      return ShapeResult::failure("the shape has too many elements");
    known *= d;
  }
  Shape out = requested;
  if (inferredAt >= 0) {
    if (known == 0 || *inCount % known != 0)
      return ShapeResult::failure(str(*inCount) +
                                  " elements cannot be split into " +
                                  format(requested));
    out[inferredAt] = *inCount / known;
  } else if (known != *inCount) {
    return ShapeResult::failure(str(*inCount) + " elements cannot become " +
                                str(known));
  }
  return ShapeResult::success(out);
}

ShapeResult transpose(const Shape &input,
                      const std::vector<int64_t> &permutation) {
  if (permutation.size() != input.size())
    return ShapeResult::failure("the permutation has " +
                                str(permutation.size()) + " entries for rank " +
                                str(input.size()));
  std::vector<bool> seen(input.size(), false);
  Shape out;
  for (int64_t p : permutation) {
    if (p < 0 || p >= int64_t(input.size()) || seen[p])
      return ShapeResult::failure(
          "the permutation is not a permutation of 0.." +
          str(int64_t(input.size()) - 1));
    seen[p] = true;
    out.push_back(input[p]);
  }
  return ShapeResult::success(out);
}

ShapeResult slice(const Shape &input, int64_t axis, int64_t start, int64_t end,
                  int64_t step) {
  auto a = normalizeAxis(axis, input.size());
  if (!a)
    return ShapeResult::failure(axisError(axis, input.size()));
  if (step <= 0)
    return ShapeResult::failure("the step must be positive, not " + str(step));
  int64_t dim = input[*a];
  auto clampIndex = [dim](int64_t i) {
    if (i < 0)
      i = i < -dim ? 0 : i + dim;
    return std::min(i, dim);
  };
  int64_t lo = clampIndex(start), hi = clampIndex(end);
  int64_t len = hi > lo ? (hi - lo + step - 1) / step : 0;
  if (len == 0)
    return ShapeResult::failure("the slice " + str(start) + ":" + str(end) +
                                " of a dimension of " + str(dim) + " is empty");
  Shape out = input;
  out[*a] = len;
  return ShapeResult::success(out);
}

ShapeResult concat(const std::vector<Shape> &inputs, int64_t axis) {
  if (inputs.empty())
    return ShapeResult::failure("nothing to concatenate");
  const Shape &first = inputs.front();
  auto a = normalizeAxis(axis, first.size());
  if (!a)
    return ShapeResult::failure(axisError(axis, first.size()));
  Shape out = first;
  for (size_t n = 1; n < inputs.size(); ++n) {
    const Shape &s = inputs[n];
    if (s.size() != first.size())
      return ShapeResult::failure("operand " + str(n) + " has rank " +
                                  str(s.size()) + ", not " + str(first.size()));
    for (size_t i = 0; i < s.size(); ++i)
      if (int64_t(i) != *a && s[i] != first[i])
        return ShapeResult::failure("operand " + str(n) + " has shape " +
                                    format(s) + ", which differs from " +
                                    format(first) + " off axis " + str(*a));
    out[*a] += s[*a];
  }
  return ShapeResult::success(out);
}

/// Output extent of a sliding window, or -1 when the window does not fit.
static int64_t windowExtent(int64_t in, int64_t window, int64_t stride,
                            int64_t pad) {
  int64_t span = in + 2 * pad - window;
  return span < 0 ? -1 : span / stride + 1;
}

static std::string checkWindowParams(const std::vector<int64_t> &window,
                                     const std::vector<int64_t> &stride,
                                     const std::vector<int64_t> &padding) {
  if (window.size() != 2 || stride.size() != 2 || padding.size() != 2)
    return "kernel, stride and padding must each have 2 entries";
  for (int i = 0; i < 2; ++i) {
    if (window[i] <= 0)
      return "the kernel size must be positive";
    if (stride[i] <= 0)
      return "the stride must be positive";
    if (padding[i] < 0)
      return "the padding must not be negative";
    if (padding[i] * 2 > window[i])
      return "the padding " + str(padding[i]) + " exceeds half the kernel " +
             str(window[i]);
  }
  return "";
}

ShapeResult conv2d(const Shape &input, const Shape &weight,
                   const std::vector<int64_t> &stride,
                   const std::vector<int64_t> &padding) {
  if (input.size() != 4)
    return ShapeResult::failure("the input must be [N,C,H,W], not rank " +
                                str(input.size()));
  if (weight.size() != 4)
    return ShapeResult::failure("the weight must be [O,C,KH,KW], not rank " +
                                str(weight.size()));
  if (input[1] != weight[1])
    return ShapeResult::failure("the input has " + str(input[1]) +
                                " channels but the weight expects " +
                                str(weight[1]));
  std::string err = checkWindowParams({weight[2], weight[3]}, stride, padding);
  if (!err.empty())
    return ShapeResult::failure(err);
  int64_t ho = windowExtent(input[2], weight[2], stride[0], padding[0]);
  int64_t wo = windowExtent(input[3], weight[3], stride[1], padding[1]);
  if (ho <= 0 || wo <= 0)
    return ShapeResult::failure("the kernel is larger than the padded input");
  return ShapeResult::success({input[0], weight[0], ho, wo});
}

ShapeResult convTranspose2d(const Shape &input, const Shape &weight,
                            const std::vector<int64_t> &stride,
                            const std::vector<int64_t> &padding,
                            const std::vector<int64_t> &outputPadding) {
  if (input.size() != 4)
    return ShapeResult::failure("the input must be [N,C,H,W], not rank " +
                                str(input.size()));
  if (weight.size() != 4)
    return ShapeResult::failure(
        "the weight must be [C_in,C_out,KH,KW], not rank " +
        str(weight.size()));
  if (input[1] != weight[0])
    return ShapeResult::failure("the input has " + str(input[1]) +
                                " channels but the weight expects " +
                                str(weight[0]));
  std::string err = checkWindowParams({weight[2], weight[3]}, stride, padding);
  if (!err.empty())
    return ShapeResult::failure(err);
  Shape out{input[0], weight[1], 0, 0};
  for (int d = 0; d < 2; ++d) {
    if (outputPadding[d] < 0 || outputPadding[d] >= stride[d])
      return ShapeResult::failure(
          "output_padding must be at least 0 and smaller than the stride");
    out[2 + d] = (input[2 + d] - 1) * stride[d] - 2 * padding[d] +
                 weight[2 + d] + outputPadding[d];
    if (out[2 + d] <= 0)
      return ShapeResult::failure("the padding leaves no output");
  }
  return ShapeResult::success(out);
}

ShapeResult pool2d(const Shape &input, const std::vector<int64_t> &kernel,
                   const std::vector<int64_t> &stride,
                   const std::vector<int64_t> &padding) {
  if (input.size() != 4)
    return ShapeResult::failure("the input must be [N,C,H,W], not rank " +
                                str(input.size()));
  std::string err = checkWindowParams(kernel, stride, padding);
  if (!err.empty())
    return ShapeResult::failure(err);
  int64_t ho = windowExtent(input[2], kernel[0], stride[0], padding[0]);
  int64_t wo = windowExtent(input[3], kernel[1], stride[1], padding[1]);
  if (ho <= 0 || wo <= 0)
    return ShapeResult::failure("the window is larger than the padded input");
  return ShapeResult::success({input[0], input[1], ho, wo});
}

ShapeResult embedding(const Shape &table, const Shape &indices) {
  if (table.size() != 2)
    return ShapeResult::failure("the table must be [V,D], not rank " +
                                str(table.size()));
  Shape out = indices;
  out.push_back(table[1]);
  return ShapeResult::success(out);
}

ShapeResult crossEntropy(const Shape &logits, const Shape &targets) {
  if (logits.empty())
    return ShapeResult::failure("the logits must have a class dimension");
  Shape expected(logits.begin(), logits.end() - 1);
  if (expected != targets)
    return ShapeResult::failure("targets " + format(targets) +
                                " must match the logits without their class "
                                "dimension, " +
                                format(expected));
  return ShapeResult::success({});
}

ShapeResult lastDimNorm(const Shape &input, const Shape &scale) {
  if (input.empty())
    return ShapeResult::failure("the input must have rank >= 1");
  if (scale.size() != 1 || scale[0] != input.back())
    return ShapeResult::failure("the scale must be [" + str(input.back()) +
                                "], not " + format(scale));
  return ShapeResult::success(input);
}

ShapeResult channelNorm(const Shape &input, const Shape &scale) {
  if (input.size() < 2)
    return ShapeResult::failure(
        "the input must have rank >= 2 ([batch, channels, ...]), not " +
        format(input));
  if (scale.size() != 1 || scale[0] != input[1])
    return ShapeResult::failure("the per-channel tensors must be [" +
                                str(input[1]) + "], not " + format(scale));
  return ShapeResult::success(input);
}

ShapeResult attention(const Shape &q, const Shape &k, const Shape &v,
                      const Shape *mask) {
  size_t rank = q.size();
  if (rank < 3 || k.size() != rank || v.size() != rank)
    return ShapeResult::failure(
        "queries, keys and values must have the same rank >= 3 ([..., heads, "
        "tokens, head_dim]), not " +
        format(q) + ", " + format(k) + " and " + format(v));
  for (size_t d = 0; d + 3 < rank; ++d)
    if (k[d] != q[d] || v[d] != q[d])
      return ShapeResult::failure("leading dimensions of " + format(q) + ", " +
                                  format(k) + " and " + format(v) + " differ");
  int64_t heads = q[rank - 3], kvHeads = k[rank - 3];
  if (v[rank - 3] != kvHeads || v[rank - 2] != k[rank - 2])
    return ShapeResult::failure("keys " + format(k) + " and values " +
                                format(v) + " differ in heads or tokens");
  if (kvHeads < 1 || heads % kvHeads != 0)
    return ShapeResult::failure(str(heads) +
                                " query heads are not a multiple of " +
                                str(kvHeads) + " key/value heads");
  if (k[rank - 1] != q[rank - 1])
    return ShapeResult::failure("queries " + format(q) + " and keys " +
                                format(k) + " differ in head_dim");
  if (mask) {
    Shape scores = q;
    scores[rank - 1] = k[rank - 2];
    if (mask->size() > rank || !broadcastTo(*mask, scores).ok())
      return ShapeResult::failure("the mask " + format(*mask) +
                                  " does not broadcast to the scores " +
                                  format(scores));
    // Leading dimensions: all broadcast or all present.
    size_t offset = rank - mask->size();
    bool someOne = false, someFull = false;
    for (size_t d = 0; d + 3 < rank; ++d) {
      int64_t m = d < offset ? 1 : (*mask)[d - offset];
      if (q[d] == 1)
        continue;
      (m == 1 ? someOne : someFull) = true;
    }
    if (someOne && someFull)
      return ShapeResult::failure(
          "the mask " + format(*mask) +
          " must broadcast over all leading dimensions of " + format(scores) +
          " or over none");
  }
  Shape out = q;
  out[rank - 1] = v[rank - 1];
  return ShapeResult::success(out);
}

int64_t rowLength(const Shape &shape) {
  int64_t row = 1;
  for (size_t d = shape.size() >= 2 ? 1 : 0; d < shape.size(); ++d)
    row *= shape[d];
  return row;
}

std::string pruneProblem(const std::string &method, const Shape &shape,
                         int64_t dim, int64_t n, int64_t m) {
  if (method == "structured" && dim >= int64_t(shape.size()))
    return "structured pruning along dim " + std::to_string(dim) +
           " needs a tensor of rank " + std::to_string(dim + 1) + " or more";
  if (method != "nm")
    return "";
  if (m < 2 || m > 32 || (m & (m - 1)))
    return "N:M pruning needs m a power of two from 2 to 32, not " +
           std::to_string(m);
  if (n >= m)
    return "N:M pruning keeps n of every m, so n must be less than m (" +
           std::to_string(n) + ":" + std::to_string(m) + ")";
  int64_t row = rowLength(shape);
  if (row % m != 0)
    return std::to_string(n) + ":" + std::to_string(m) +
           " pruning needs rows of a multiple of " + std::to_string(m) +
           " elements, and these rows have " + std::to_string(row);
  return "";
}

} // namespace mnemo::shape
