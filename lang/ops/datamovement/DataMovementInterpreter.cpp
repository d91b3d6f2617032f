//===- DataMovementInterpreter.cpp - Data movement in the interpreter -----===//
//
// The interpreter's models of slice, slice_grad, concat and causal_mask:
// each element copied by its multi-index in the larger tensor, with none of
// the kernels' row copies.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/ShapeRules.h"
#include "lang/interpreter/OpContext.h"

#include <type_traits>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// slice (big to small) and slice_grad (small into zeros of big's shape).
template <typename Op>
struct SliceInterpreterModel
    : InterpretedOpInterface::ExternalModel<SliceInterpreterModel<Op>, Op> {
  LogicalResult interpret(Operation *operation, OpContext &context) const {
    auto op = llvm::cast<Op>(operation);
    constexpr bool grad = std::is_same_v<Op, SliceGradOp>;
    const Tensor &x = context.get(op->getOperand(0));
    Tensor out = context.like(op.getResult());
    const Tensor &big = grad ? out : x;
    const Tensor &small = grad ? x : out;
    int64_t axis = *shape::normalizeAxis(int64_t(op.getAxis()),
                                         big.rank()); // verified
    int64_t start = int64_t(op.getStart()), step = int64_t(op.getStep());
    std::vector<int64_t> bigStrides = big.strides();
    IndexCounter it(small.shape);
    for (int64_t flat = 0; flat < small.numElements(); ++flat, it.next()) {
      int64_t at = 0;
      for (int64_t i = 0; i < small.rank(); ++i)
        at += (i == axis ? start + it.index[i] * step : it.index[i]) *
              bigStrides[i];
      if (grad)
        out.data[at] = x.data[flat];
      else
        out.data[flat] = x.data[at];
    }
    context.set(op.getResult(), std::move(out));
    return success();
  }
};

struct ConcatInterpreterModel
    : InterpretedOpInterface::ExternalModel<ConcatInterpreterModel, ConcatOp> {
  LogicalResult interpret(Operation *operation, OpContext &context) const {
    auto op = llvm::cast<ConcatOp>(operation);
    Tensor out = context.like(op.getResult());
    int64_t axis = int64_t(op.getAxis()), outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= out.shape[d];
    for (int64_t d = axis + 1; d < out.rank(); ++d)
      inner *= out.shape[d];
    int64_t offset = 0;
    for (Value input : op.getInputs()) {
      const Tensor &x = context.get(input);
      int64_t n = x.shape[axis];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < n * inner; ++j)
          out.data[(o * out.shape[axis] + offset) * inner + j] =
              x.data[o * n * inner + j];
      offset += n;
    }
    context.set(op.getResult(), std::move(out));
    return success();
  }
};

struct CausalMaskInterpreterModel
    : InterpretedOpInterface::ExternalModel<CausalMaskInterpreterModel,
                                            CausalMaskOp> {
  LogicalResult interpret(Operation *operation, OpContext &context) const {
    auto op = llvm::cast<CausalMaskOp>(operation);
    Tensor out = context.like(op.getResult());
    int64_t rows = out.shape[0], cols = out.shape[1];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out.data[r * cols + c] = c <= r + (cols - rows) ? 1 : 0;
    context.set(op.getResult(), std::move(out));
    return success();
  }
};

} // namespace

namespace mnemo {
namespace interp {
/// Called by registerFamilyInterpreterModels (generated).
void registerDataMovementInterpreterModels(MLIRContext &context) {
  SliceOp::attachInterface<SliceInterpreterModel<SliceOp>>(context);
  SliceGradOp::attachInterface<SliceInterpreterModel<SliceGradOp>>(context);
  ConcatOp::attachInterface<ConcatInterpreterModel>(context);
  CausalMaskOp::attachInterface<CausalMaskInterpreterModel>(context);
}
} // namespace interp
} // namespace mnemo
