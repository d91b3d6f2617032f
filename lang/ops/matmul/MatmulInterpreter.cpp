//===- MatmulInterpreter.cpp - Matrix products in the interpreter ---------===//
//
// The interpreter's model of matmul and batch_matmul: the textbook triple
// loop in double over each matrix of the batch, reading the transposed
// operands by index, with none of the kernels' blocking or BLAS.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"

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
  for (int64_t batch = 0; batch < batches; ++batch) {
    const double *A = &a.data[batch * aMat];
    const double *B = batched ? &b.data[batch * bMat] : b.data.data();
    double *C = &out.data[batch * m * n];
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        double av = ta ? A[p * m + i] : A[i * k + p];
        if (av == 0)
          continue;
        for (int64_t j = 0; j < n; ++j)
          C[i * n + j] += av * (tb ? B[j * k + p] : B[p * n + j]);
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
