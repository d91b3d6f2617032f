//===- DataMovementInterpreter.cpp - Data movement in the interpreter -----===//
//
// The interpreter's models of the data movement ops: a constant's
// elements, a reshape's same values, a transpose or a broadcast read by
// multi-index (a transpose the plan made a strided view is read through its
// source), and slice, slice_grad, concat and causal_mask with each element
// copied by its multi-index in the larger tensor, with none of the kernels'
// row copies.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/PlanAttributes.h"
#include "lang/ShapeRules.h"
#include "lang/interpreter/OpContext.h"

#include <type_traits>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

LogicalResult interpretConstant(ConstantOp op, OpContext &context) {
  auto dense = llvm::dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return context.fail(op, "only dense constants are supported");
  Tensor out = context.like(op.getResult());
  int64_t i = 0;
  if (llvm::isa<FloatType>(dense.getElementType())) {
    for (APFloat v : dense.getValues<APFloat>())
      out.data[i++] = v.convertToDouble();
  } else {
    for (APInt v : dense.getValues<APInt>())
      out.data[i++] = double(v.getSExtValue());
  }
  return context.finish(op.getResult(), std::move(out));
}

LogicalResult interpretReshape(ReshapeOp op, OpContext &context) {
  Tensor out = context.get(op.getInput());
  out.shape = context.like(op.getResult()).shape;
  return context.finish(op.getResult(), std::move(out));
}

LogicalResult interpretTranspose(TransposeOp op, OpContext &context) {
  PlacementAttr placed = plan::placement(op);
  if (context.options().arena && placed && placed.getStridedView()) {
    // Planned as a view: nothing is written; every use reads the source.
    context.readThrough(op.getResult(), op.getInput(), op.getPermutation());
    return success();
  }
  return context.finish(op.getResult(), permute(context.get(op.getInput()),
                                                op.getPermutation().vec(),
                                                context.like(op.getResult())));
}

LogicalResult interpretBroadcast(BroadcastOp op, OpContext &context) {
  const Tensor &x = context.get(op.getInput());
  Tensor out = context.like(op.getResult());
  std::vector<int64_t> inStrides = x.strides();
  int64_t lead = out.rank() - x.rank();
  IndexCounter it(out.shape);
  for (int64_t flat = 0; flat < out.numElements(); ++flat, it.next()) {
    int64_t source = 0;
    for (int64_t i = 0; i < x.rank(); ++i)
      if (x.shape[i] != 1)
        source += it.index[lead + i] * inStrides[i];
    out.data[flat] = x.data[source];
  }
  return context.finish(op.getResult(), std::move(out));
}

/// slice (big to small) and slice_grad (small into zeros of big's shape).
template <typename Op> LogicalResult interpretSlice(Op op, OpContext &context) {
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
  return context.finish(op.getResult(), std::move(out));
}

LogicalResult interpretConcat(ConcatOp op, OpContext &context) {
  Tensor out = context.like(op.getResult());
  int64_t axis = int64_t(op.getAxis());
  auto [outer, extent, inner] = shape::aroundAxis(out.shape, axis);
  int64_t offset = 0;
  for (Value input : op.getInputs()) {
    const Tensor &x = context.get(input);
    int64_t n = x.shape[axis];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n * inner; ++j)
        out.data[(o * extent + offset) * inner + j] = x.data[o * n * inner + j];
    offset += n;
  }
  return context.finish(op.getResult(), std::move(out));
}

LogicalResult interpretCausalMask(CausalMaskOp op, OpContext &context) {
  Tensor out = context.like(op.getResult());
  int64_t rows = out.shape[0], cols = out.shape[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out.data[r * cols + c] = c <= r + (cols - rows) ? 1 : 0;
  return context.finish(op.getResult(), std::move(out));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerDataMovementInterpreterModels(MLIRContext &context) {
  InterpreterFunction<ConstantOp, interpretConstant>::attach(context);
  InterpreterFunction<ReshapeOp, interpretReshape>::attach(context);
  InterpreterFunction<TransposeOp, interpretTranspose>::attach(context);
  InterpreterFunction<BroadcastOp, interpretBroadcast>::attach(context);
  InterpreterFunction<SliceOp, interpretSlice<SliceOp>>::attach(context);
  InterpreterFunction<SliceGradOp, interpretSlice<SliceGradOp>>::attach(
      context);
  InterpreterFunction<ConcatOp, interpretConcat>::attach(context);
  InterpreterFunction<CausalMaskOp, interpretCausalMask>::attach(context);
}
