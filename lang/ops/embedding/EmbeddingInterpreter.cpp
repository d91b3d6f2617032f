//===- EmbeddingInterpreter.cpp - Embeddings in the reference interpreter -===//
//
// The interpreter's model of embedding and embedding_grad: a gather, and a
// scatter-add in index order. An index outside the table is an error, as
// in PyTorch.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"

#include <string>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// The gather (grad false: operands table, indices) or the scatter-add
/// (grad true: operands the rows' gradients, indices).
LogicalResult interpretEmbedding(Operation *op, OpContext &context, bool grad) {
  const Tensor &a = context.get(op->getOperand(0));
  const Tensor &indices = context.get(op->getOperand(1));
  Tensor out = context.like(op->getResult(0));
  const Tensor &table = grad ? out : a;
  int64_t rows = table.shape[0], dim = table.shape[1];
  for (int64_t i = 0; i < indices.numElements(); ++i) {
    int64_t row = int64_t(indices.data[i]);
    if (row < 0 || row >= rows)
      return context.fail(op, "index " + std::to_string(row) +
                                  " is out of range for " +
                                  std::to_string(rows) + " rows");
    for (int64_t j = 0; j < dim; ++j) {
      if (grad)
        out.data[row * dim + j] += a.data[i * dim + j];
      else
        out.data[i * dim + j] = a.data[row * dim + j];
    }
  }
  return context.finish(op->getResult(0), std::move(out));
}

template <typename Op, bool Grad>
struct EmbeddingInterpreterModel
    : InterpretedOpInterface::ExternalModel<EmbeddingInterpreterModel<Op, Grad>,
                                            Op> {
  LogicalResult interpret(Operation *op, OpContext &context) const {
    return interpretEmbedding(op, context, Grad);
  }
};

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerEmbeddingInterpreterModels(MLIRContext &context) {
  EmbeddingOp::attachInterface<EmbeddingInterpreterModel<EmbeddingOp, false>>(
      context);
  EmbeddingGradOp::attachInterface<
      EmbeddingInterpreterModel<EmbeddingGradOp, true>>(context);
}
