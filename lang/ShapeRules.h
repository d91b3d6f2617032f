//===- ShapeRules.h - Shape rules of the Mnemo op set -----------*- C++ -*-===//
//
// The single definition of how every Mnemo op maps operand shapes to a result
// shape. The frontend uses these rules to infer shapes (and to word errors at
// the source expression); the dialect's op verifiers use the same rules, so
// the language and the IR can never disagree about what is well-shaped.
//
// Deliberately free of MLIR and LLVM: shapes are plain vectors of int64_t.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_SHAPERULES_H
#define MNEMO_LANG_SHAPERULES_H

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mnemo::shape {

using Shape = std::vector<int64_t>;

/// The outcome of a shape rule: a shape, or the reason there is none. The
/// reason is a sentence fragment ("inner dimensions 784 and 512 differ") that
/// callers prefix with what was attempted.
struct ShapeResult {
  Shape shape;
  std::string error;

  bool ok() const { return error.empty(); }
  static ShapeResult success(Shape s) { return {std::move(s), ""}; }
  static ShapeResult failure(std::string why) { return {{}, std::move(why)}; }
};

/// Largest number of elements a single tensor may have. Keeps element counts
/// and byte sizes far from int64 overflow.
constexpr int64_t kMaxElements = int64_t(1) << 48;

/// "[128,784]".
std::string format(const Shape &shape);

/// Number of elements, or nullopt if the shape has a negative dimension or the
/// count exceeds kMaxElements.
std::optional<int64_t> numElements(const Shape &shape);

/// Row-major strides of `shape`, in elements.
Shape rowMajorStrides(const Shape &shape);

/// Maps a possibly negative axis into [0, rank); nullopt when out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// `dims` as rows along axis `axis`: {the elements before the axis, its
/// extent, the elements after it}. Element (o, j, i) lies at
/// (o * extent + j) * inner + i.
template <typename Dims>
std::array<int64_t, 3> aroundAxis(const Dims &dims, int64_t axis) {
  std::array<int64_t, 3> rows{1, int64_t(dims[axis]), 1};
  for (int64_t d = 0; d < int64_t(dims.size()); ++d)
    if (d != axis)
      rows[d < axis ? 0 : 2] *= dims[d];
  return rows;
}

/// numpy broadcasting of two shapes.
ShapeResult broadcast(const Shape &a, const Shape &b);

/// Whether `from` broadcasts to exactly `to` (numpy broadcast_to).
ShapeResult broadcastTo(const Shape &from, const Shape &to);

/// lhs [..., M, K] (rank >= 2) times rhs [K, N]; the transposes swap the last
/// two dimensions of the operand they name. Result [..., M, N].
ShapeResult matmul(const Shape &lhs, const Shape &rhs, bool transposeLhs,
                   bool transposeRhs);

/// lhs [B..., M, K] times rhs [B..., K, N] with identical batch dimensions
/// (rank >= 3). Result [B..., M, N].
ShapeResult batchMatmul(const Shape &lhs, const Shape &rhs, bool transposeLhs,
                        bool transposeRhs);

/// Reduction over `axes` (negative allowed, no duplicates).
ShapeResult reduce(const Shape &input, const std::vector<int64_t> &axes,
                   bool keepDims);

/// Reshape to `requested`, where at most one entry may be -1 (inferred).
ShapeResult reshape(const Shape &input, const Shape &requested);

/// Permutation of the dimensions: result[i] = input[permutation[i]].
ShapeResult transpose(const Shape &input,
                      const std::vector<int64_t> &permutation);

/// Python-style slice [start:end:step] along one axis (negative start/end
/// count from the end; both clamp to the dimension; step > 0).
ShapeResult slice(const Shape &input, int64_t axis, int64_t start, int64_t end,
                  int64_t step);

/// Concatenation along `axis`; all other dimensions must agree.
ShapeResult concat(const std::vector<Shape> &inputs, int64_t axis);

/// input [N, C, H, W], weight [O, C, KH, KW] -> [N, O, HO, WO].
ShapeResult conv2d(const Shape &input, const Shape &weight,
                   const std::vector<int64_t> &stride,
                   const std::vector<int64_t> &padding);

/// input [N, C, H, W] pooled with a window -> [N, C, HO, WO].
ShapeResult pool2d(const Shape &input, const std::vector<int64_t> &kernel,
                   const std::vector<int64_t> &stride,
                   const std::vector<int64_t> &padding);

/// table [V, D] gathered at indices [...] -> [..., D].
ShapeResult embedding(const Shape &table, const Shape &indices);

/// logits [..., C] and class targets [...] -> scalar mean loss.
ShapeResult crossEntropy(const Shape &logits, const Shape &targets);

/// Normalization over the last dimension with a [D] scale (and bias).
ShapeResult lastDimNorm(const Shape &input, const Shape &scale);

/// A transposed convolution of [N, Cin, H, W] with a [Cin, Cout, KH, KW]
/// weight (torch.nn.ConvTranspose2d's layout): [N, Cout, (H - 1) * stride -
/// 2 * padding + K + output_padding, ...]; output_padding must be smaller
/// than the stride.
ShapeResult convTranspose2d(const Shape &input, const Shape &weight,
                            const std::vector<int64_t> &stride,
                            const std::vector<int64_t> &padding,
                            const std::vector<int64_t> &outputPadding);

/// Batch normalization of [N, C, ...] per channel (dim 1) with a [C] scale
/// (and bias, mean, variance).
ShapeResult channelNorm(const Shape &input, const Shape &scale);

/// Scaled dot-product attention: q [..., H, Tq, D], k [..., Hkv, Tk, D] and
/// v [..., Hkv, Tk, Dv] with the same leading dimensions and H a multiple of
/// Hkv (grouped-query attention) -> [..., H, Tq, Dv]. A mask (`mask`, may
/// be null) broadcasts to [..., H, Tq, Tk] from the right, its leading
/// dimensions all 1 or all the queries' (the kernels address it with one
/// batch stride).
ShapeResult attention(const Shape &q, const Shape &k, const Shape &v,
                      const Shape *mask);

/// The elements of one row of a weight [out, ...]: those after dim 0 (all
/// of a vector's).
int64_t rowLength(const Shape &shape);

/// Why a pruning method (magnitude, structured along `dim`, nm with `n`
/// of every `m`) cannot prune a tensor of `shape`, or "" when it can. N:M
/// groups run along each row (the elements after dim 0), as sparse tensor
/// cores read a weight [out, in].
std::string pruneProblem(const std::string &method, const Shape &shape,
                         int64_t dim, int64_t n, int64_t m);

} // namespace mnemo::shape

#endif // MNEMO_LANG_SHAPERULES_H
