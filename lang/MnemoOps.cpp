//===- MnemoOps.cpp - Verifiers, folders and canonicalizations ------------===//
//
// Shape checks delegate to lang/ShapeRules.h so that the IR accepts exactly
// what the frontend produces.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/OpVerification.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static std::vector<int64_t> toVector(ArrayRef<int64_t> values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

LogicalResult verification::verifyResult(Operation *op,
                                         const shape::ShapeResult &rule,
                                         Type elementType) {
  if (!rule.ok())
    return op->emitOpError() << rule.error;
  Value result = op->getResult(0);
  if (shapeOf(result) != rule.shape)
    return op->emitOpError()
           << "result shape " << shape::format(shapeOf(result)) << " should be "
           << shape::format(rule.shape);
  if (elementType && tensorType(result).getElementType() != elementType)
    return op->emitOpError()
           << "result element type " << tensorType(result).getElementType()
           << " should be " << elementType;
  return success();
}

LogicalResult verification::verifySameElementType(Operation *op,
                                                  ValueRange values) {
  Type first = tensorType(values.front()).getElementType();
  for (Value v : values.drop_front())
    if (tensorType(v).getElementType() != first)
      return op->emitOpError()
             << "operands must share one element type, not " << first << " and "
             << tensorType(v).getElementType();
  return success();
}

std::pair<int64_t, int64_t> verification::rowsAndDepth(Value v) {
  auto type = tensorType(v);
  int64_t k = type.getRank() ? type.getDimSize(type.getRank() - 1) : 1;
  return {type.getNumElements() / std::max<int64_t>(k, 1), k};
}

LogicalResult verification::verifyRowProduct(Operation *op, Value lhs,
                                             Value result, int64_t n) {
  auto in = tensorType(lhs), out = tensorType(result);
  if (in.getRank() < 1 || out.getRank() != in.getRank() ||
      in.getShape().drop_back() != out.getShape().drop_back() ||
      out.getShape().back() != n)
    return op->emitOpError()
           << "the result must be " << in << " with its last dimension " << n
           << ", not " << out;
  return success();
}

/// Whether `attr` is a splat constant equal to `value`.
static bool isSplatOf(Attribute attr, double value) {
  auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  Type element = dense.getElementType();
  if (llvm::isa<FloatType>(element))
    return dense.getSplatValue<APFloat>().convertToDouble() == value;
  if (element.isInteger(1))
    return false;
  if (llvm::isa<IntegerType>(element))
    return double(dense.getSplatValue<APInt>().getSExtValue()) == value;
  return false;
}

//===----------------------------------------------------------------------===//
// Folders
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 0.0))
    return getRhs();
  return {};
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return isSplatOf(adaptor.getRhs(), 0.0) ? getLhs() : OpFoldResult();
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 1.0))
    return getRhs();
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return isSplatOf(adaptor.getRhs(), 1.0) ? getLhs() : OpFoldResult();
}

/// Whether every value of `from` is exactly a value of `to` (so that a
/// cast from -> to -> from gives back the original).
static bool widensExactly(Type from, Type to) {
  if (from == to)
    return true;
  if (to.isF32())
    return from.isBF16() || from.isF16();
  return false;
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // cast(cast(x)) after an exact widening (bf16 -> f32 -> bf16, f16 -> f32
  // -> ...) is one cast of x, or x itself. A narrowing inner cast rounds,
  // and stays.
  if (auto inner = getInput().getDefiningOp<CastOp>()) {
    Type original = tensorType(inner.getInput()).getElementType();
    Type middle = tensorType(inner.getResult()).getElementType();
    if (widensExactly(original, middle)) {
      if (inner.getInput().getType() == getType())
        return inner.getInput();
      getInputMutable().assign(inner.getInput());
      return getResult();
    }
  }
  return {};
}

OpFoldResult BroadcastOp::fold(FoldAdaptor) {
  return getInput().getType() == getType() ? getInput() : OpFoldResult();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) is reshape(x): only the final shape matters.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i))
      return {};
  return getInput();
}

LogicalResult TransposeOp::canonicalize(TransposeOp op,
                                        PatternRewriter &rewriter) {
  auto inner = op.getInput().getDefiningOp<TransposeOp>();
  if (!inner)
    return failure();
  // outer[i] reads inner dimension perm[i], which reads input innerPerm[...].
  ArrayRef<int64_t> outerPerm = op.getPermutation();
  ArrayRef<int64_t> innerPerm = inner.getPermutation();
  SmallVector<int64_t> composed;
  for (int64_t p : outerPerm)
    composed.push_back(innerPerm[p]);
  rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(), inner.getInput(),
                                           composed);
  return success();
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

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult CastOp::verify() {
  if (shapeOf(getInput()) != shapeOf(getResult()))
    return emitOpError("a cast cannot change the shape");
  return success();
}

LogicalResult WhereOp::verify() {
  if (shapeOf(getCondition()) != shapeOf(getResult()))
    return emitOpError() << "condition shape "
                         << shape::format(shapeOf(getCondition()))
                         << " differs from the value shape "
                         << shape::format(shapeOf(getResult()));
  return success();
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0))
    return emitOpError() << "p must be in [0, 1), not " << p;
  return success();
}

LogicalResult Adam8bitUpdateOp::verify() {
  // One byte per parameter element, one maximum per block.
  if (shapeOf(getExpAvgCodes()) != shapeOf(getParam()))
    return emitOpError("the moment codes must have the parameter's shape");
  int64_t block = getBlockSize();
  if (block <= 0)
    return emitOpError("block_size must be positive");
  int64_t elements = tensorType(getParam()).getNumElements();
  auto absmax = tensorType(getExpAvgAbsmax());
  int64_t blocks = (elements + block - 1) / block;
  if (absmax.getRank() != 1 || absmax.getDimSize(0) != blocks)
    return emitOpError() << "the moment maxima must be [" << blocks
                         << "] (one per block of " << block << " elements)";
  return success();
}

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

LogicalResult ReshapeOp::verify() {
  if (failed(verifySameElementType(*this, {getInput(), getResult()})))
    return failure();
  return verifyResult(
      *this, shape::reshape(shapeOf(getInput()), shapeOf(getResult())));
}

LogicalResult TransposeOp::verify() {
  if (failed(verifySameElementType(*this, {getInput(), getResult()})))
    return failure();
  return verifyResult(
      *this, shape::transpose(shapeOf(getInput()), toVector(getPermutation())));
}

LogicalResult BroadcastOp::verify() {
  if (failed(verifySameElementType(*this, {getInput(), getResult()})))
    return failure();
  return verifyResult(
      *this, shape::broadcastTo(shapeOf(getInput()), shapeOf(getResult())));
}

//===----------------------------------------------------------------------===//
// Backward and training ops
//===----------------------------------------------------------------------===//

LogicalResult LrScheduleOp::verify() {
  if (getKind() != "constant" && getKind() != "cosine")
    return emitOpError("kind must be constant or cosine, not ") << getKind();
  return success();
}

#define GET_OP_CLASSES
#include "lang/MnemoOps.cpp.inc"
