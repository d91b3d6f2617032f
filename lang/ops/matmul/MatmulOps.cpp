//===- MatmulOps.cpp - Shape checks, gradients, workspaces ----------------===//
//
// A transposed operand becomes the product's transpose flag (no copy); the
// gradients are products again, with the flags chosen so that nothing is
// transposed in memory. On the CPU a product of 16-bit storage widens its
// matrices into the workspace for sgemm; on the GPU cuBLASLt gets its
// workspace, and a batch that does not flatten its pointer tables.
//
//===----------------------------------------------------------------------===//

#include "lang/GradientBuilder.h"
#include "lang/OpVerification.h"
#include "runtime/cpu/Kernels.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::gradient;
using namespace mnemo::verification;

LogicalResult MatmulOp::verify() {
  if (failed(verifySameElementType(*this, {getLhs(), getRhs(), getResult()})))
    return failure();
  return verifyResult(*this,
                      shape::matmul(shapeOf(getLhs()), shapeOf(getRhs()),
                                    getTransposeLhs(), getTransposeRhs()));
}

LogicalResult BatchMatmulOp::verify() {
  if (failed(verifySameElementType(*this, {getLhs(), getRhs(), getResult()})))
    return failure();
  return verifyResult(*this,
                      shape::batchMatmul(shapeOf(getLhs()), shapeOf(getRhs()),
                                         getTransposeLhs(), getTransposeRhs()));
}

/// If `operand` is a transpose that, after swapping its last two dimensions,
/// keeps the last dimension in place, returns that cheaper inner transpose's
/// input and permutation: matmul can read the swap through its transpose
/// flag. `x @ W.T` becomes matmul(x, W) {transpose_rhs}, with no copy.
static std::optional<std::pair<Value, SmallVector<int64_t>>>
absorbableTranspose(Value operand) {
  auto transpose = operand.getDefiningOp<TransposeOp>();
  if (!transpose)
    return std::nullopt;
  SmallVector<int64_t> perm(transpose.getPermutation());
  size_t rank = perm.size();
  if (rank < 2 || perm[rank - 1] == int64_t(rank - 1))
    return std::nullopt;
  std::swap(perm[rank - 1], perm[rank - 2]);
  if (perm[rank - 1] != int64_t(rank - 1))
    return std::nullopt;
  return std::make_pair(transpose.getInput(), perm);
}

/// Rewrites a transposed operand of a (batch) matmul into its flag.
template <typename MatmulLikeOp>
static LogicalResult absorbTransposes(MatmulLikeOp op,
                                      PatternRewriter &rewriter) {
  bool changed = false;
  Value lhs = op.getLhs(), rhs = op.getRhs();
  bool transposeLhs = op.getTransposeLhs(), transposeRhs = op.getTransposeRhs();
  auto absorb = [&](Value &operand, bool &flag) {
    auto found = absorbableTranspose(operand);
    if (!found)
      return;
    auto [input, perm] = *found;
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity &= perm[i] == int64_t(i);
    if (identity) {
      operand = input;
    } else {
      auto inputType = llvm::cast<RankedTensorType>(input.getType());
      SmallVector<int64_t> dims;
      for (int64_t p : perm)
        dims.push_back(inputType.getDimSize(p));
      operand = rewriter.create<TransposeOp>(
          op.getLoc(), RankedTensorType::get(dims, inputType.getElementType()),
          input, perm);
    }
    flag = !flag;
    changed = true;
  };
  absorb(lhs, transposeLhs);
  absorb(rhs, transposeRhs);
  if (!changed)
    return failure();
  rewriter.replaceOpWithNewOp<MatmulLikeOp>(op, op.getType(), lhs, rhs,
                                            transposeLhs, transposeRhs);
  return success();
}

LogicalResult MatmulOp::canonicalize(MatmulOp op, PatternRewriter &rewriter) {
  return absorbTransposes(op, rewriter);
}

LogicalResult BatchMatmulOp::canonicalize(BatchMatmulOp op,
                                          PatternRewriter &rewriter) {
  return absorbTransposes(op, rewriter);
}

SmallVector<Value> MatmulOp::buildGradient(OpBuilder &b,
                                           ArrayRef<Value> grads) {
  Value g = grads[0];
  Emitter e{b, getLoc()};
  Value a = getLhs(), w = getRhs();
  bool ta = getTransposeLhs(), tw = getTransposeRhs();
  auto aType = typeOf(a), wType = typeOf(w);

  // dA = g @ W^T per row; transposed back when A is read transposed.
  SmallVector<int64_t> rowsShape(typeOf(g).getShape());
  rowsShape.back() = tw ? wType.getDimSize(1) : wType.getDimSize(0);
  auto rowsGradType = RankedTensorType::get(rowsShape, aType.getElementType());
  Value daRows = b.create<MatmulOp>(getLoc(), rowsGradType, g, w, false, !tw);
  Value dA = ta ? e.transposeLast2(daRows) : daRows;

  // dW from the rows of A and g flattened to matrices: [R, K] and [R, N].
  Value rowsA = ta ? e.transposeLast2(a) : a;
  auto rowsType = typeOf(rowsA);
  int64_t k = rowsType.getShape().back();
  int64_t n = typeOf(g).getShape().back();
  int64_t r = rowsType.getNumElements() / k;
  Value a2 =
      e.reshape(rowsA, RankedTensorType::get({r, k}, aType.getElementType()));
  Value g2 =
      e.reshape(g, RankedTensorType::get({r, n}, aType.getElementType()));
  Value dW =
      tw ? b.create<MatmulOp>(getLoc(), wType, g2, a2, true, false).getResult()
         : b.create<MatmulOp>(getLoc(), wType, a2, g2, true, false).getResult();
  return {dA, dW};
}

SmallVector<Value> BatchMatmulOp::buildGradient(OpBuilder &b,
                                                ArrayRef<Value> grads) {
  Value g = grads[0];
  Value a = getLhs(), w = getRhs();
  bool ta = getTransposeLhs(), tw = getTransposeRhs();
  Location loc = getLoc();
  // A [M,K] (or [K,M] read transposed), W [K,N] (or [N,K]), g [M,N].
  Value dA =
      ta ? b.create<BatchMatmulOp>(loc, a.getType(), w, g, tw, true).getResult()
         : b.create<BatchMatmulOp>(loc, a.getType(), g, w, false, !tw)
               .getResult();
  Value dW =
      tw ? b.create<BatchMatmulOp>(loc, w.getType(), g, a, true, ta).getResult()
         : b.create<BatchMatmulOp>(loc, w.getType(), a, g, !ta, false)
               .getResult();
  return {dA, dW};
}

/// Rows, columns and depth of the product (m, n, k) as sgemm sees it: a
/// plain matmul of an untransposed lhs runs its batch rows as one matrix.
static std::array<int64_t, 3> gemmDims(Operation *op, bool transposeLhs) {
  ArrayRef<int64_t> c = tensorType(op->getResult(0)).getShape();
  ArrayRef<int64_t> a = tensorType(op->getOperand(0)).getShape();
  int64_t k = transposeLhs ? a[a.size() - 2] : a.back();
  int64_t n = c.back(), m = c[c.size() - 2];
  if (llvm::isa<MatmulOp>(op))
    m = tensorType(op->getResult(0)).getNumElements() / n;
  return {m, n, k};
}

/// On 16-bit storage, sgemm reads tiles of op(A), op(B) and writes tiles of
/// the product, widened to f32 in the workspace (runtime/cpu/Kernels.h
/// gemmHalf), one matrix of the batch at a time.
static int64_t halfGemmBytes(Operation *op, bool transposeLhs) {
  Type element = tensorType(op->getResult(0)).getElementType();
  if (!element.isBF16() && !element.isF16())
    return 0;
  auto [m, n, k] = gemmDims(op, transposeLhs);
  return 4 * cpu::gemmHalfWorkspaceFloats(m, n, k);
}

/// cuBLASLt's workspace and, for a batch whose dimensions do not flatten,
/// the pointer tables of runtime/cuda/CudaModel.h's GemmCall::outer at its
/// top: 24 bytes a product, counted for every batched product.
static int64_t cublasLtBytes(Operation *op) {
  ArrayRef<int64_t> c = tensorType(op->getResult(0)).getShape();
  int64_t products = 1;
  for (size_t d = 0; d + 2 < c.size(); ++d)
    products *= c[d];
  int64_t tables = products > 1 ? (3 * 8 * products + 255) / 256 * 256 : 0;
  return kCudaLibraryWorkspaceBytes + tables;
}

int64_t MatmulOp::getCpuWorkspaceBytes() {
  return halfGemmBytes(*this, getTransposeLhs());
}
int64_t BatchMatmulOp::getCpuWorkspaceBytes() {
  return halfGemmBytes(*this, getTransposeLhs());
}
int64_t MatmulOp::getCudaScratchBytes() { return cublasLtBytes(*this); }
int64_t BatchMatmulOp::getCudaScratchBytes() { return cublasLtBytes(*this); }
