//===- MatmulInterpreter.cpp - Matrix products in the interpreter ---------===//
//
// The interpreter's model of matmul and batch_matmul: the textbook triple
// loop in double over each matrix of the batch, with none of the kernels'
// blocking or BLAS.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"

#include <vector>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// C = op(A) op(B) per matrix of the batch; `batched`: B has the batch
/// too (batch_matmul), else one B for every row block (matmul).
template <typename Op>
LogicalResult interpretProduct(Op op, OpContext &context) {
  constexpr bool batched = std::is_same_v<Op, BatchMatmulOp>;
  bool ta = op.getTransposeLhs(), tb = op.getTransposeRhs();
  const Tensor &a = context.get(op.getLhs()), &b = context.get(op.getRhs());
  Tensor out = context.like(op.getResult());
  int64_t ar = a.rank(), br = b.rank();
  // The matrices' dimensions as read (after the transpose flags).
  int64_t m = ta ? a.shape[ar - 1] : a.shape[ar - 2];
  int64_t k = ta ? a.shape[ar - 2] : a.shape[ar - 1];
  int64_t n = tb ? b.shape[br - 2] : b.shape[br - 1];
  int64_t aMat = a.shape[ar - 2] * a.shape[ar - 1];
  int64_t bMat = b.shape[br - 2] * b.shape[br - 1];
  int64_t batches = 1;
  for (int64_t d = 0; d + 2 < ar; ++d)
    batches *= a.shape[d];
  // A transposed B is copied to [k, n] first (once for matmul's shared B),
  // so that the inner loop reads contiguous rows; every element of C still
  // sums its products in the order of p, skipping zeros of A, as the
  // textbook loop does: the copy changes the speed, not one bit.
  std::vector<double> rowsOfB(tb ? k * n : 0);
  auto readB = [&](const double *B) {
    if (!tb)
      return B;
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        rowsOfB[p * n + j] = B[j * k + p];
    return static_cast<const double *>(rowsOfB.data());
  };
  const double *sharedB = batched ? nullptr : readB(b.data.data());
  for (int64_t batch = 0; batch < batches; ++batch) {
    const double *A = &a.data[batch * aMat];
    const double *B = batched ? readB(&b.data[batch * bMat]) : sharedB;
    double *C = &out.data[batch * m * n];
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        double av = ta ? A[p * m + i] : A[i * k + p];
        if (av == 0)
          continue;
        const double *row = B + p * n;
        double *c = C + i * n;
        for (int64_t j = 0; j < n; ++j)
          c[j] += av * row[j];
      }
  }
  return context.finish(op.getResult(), std::move(out));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerMatmulInterpreterModels(MLIRContext &context) {
  InterpreterFunction<MatmulOp, interpretProduct<MatmulOp>>::attach(context);
  InterpreterFunction<BatchMatmulOp, interpretProduct<BatchMatmulOp>>::attach(
      context);
}
