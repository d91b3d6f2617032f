//===- DataMovementEmission.cpp - Data movement in the CPU and CUDA code --===//
//
// The code generation models of the data movement ops. A reshape,
// transpose or broadcast that the step layouts could not make a view (or
// read through, fused) is a copy loop through its operand's strides, the
// emitters' own. slice, slice_grad, concat and causal_mask call the CPU row
// copies (DataMovementKernels.h), and on the GPU one kernel of
// DataMovementKernels.cuh per op (per input for concat), a thread per
// element moved. slice_grad's zeros: the CPU kernel clears its result, the
// CUDA emitter clears it on the host side before the launch. Constants have
// no code: the layouts make them literals or static arrays.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"

#include "llvm/Support/FormatVariadic.h"

#include <type_traits>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

/// A materialized view or broadcast: a copy loop on either backend.
template <typename Op> LogicalResult copyCpu(Op, CpuKernelContext &context) {
  return context.copyLoop();
}
template <typename Op> LogicalResult copyCuda(Op, CudaKernelContext &context) {
  return context.copyLoop();
}

constexpr const char *kCpuKernels =
    "lang/ops/datamovement/DataMovementKernels.h";
constexpr const char *kCudaKernels =
    "lang/ops/datamovement/DataMovementKernels.cuh";

int64_t elementBytes(Value v) { return ctypeOf(v.getType()).bytes; }

/// Each input of a concatenation as {outer, its size along the axis,
/// inner, the result's size along the axis, its offset there}.
SmallVector<std::array<int64_t, 5>> concatParts(ConcatOp op) {
  Shape o = shapeOf(op.getResult());
  int64_t axis = int64_t(op.getAxis()), offset = 0;
  int64_t outer = product(ArrayRef<int64_t>(o).take_front(axis));
  int64_t inner = product(ArrayRef<int64_t>(o).drop_front(axis + 1));
  SmallVector<std::array<int64_t, 5>> parts;
  for (Value input : op.getInputs()) {
    int64_t n = shapeOf(input)[axis];
    parts.push_back({outer, n, inner, o[axis], offset});
    offset += n;
  }
  return parts;
}

template <typename Op>
LogicalResult sliceCpu(Op op, CpuKernelContext &context) {
  std::string input = context.operand(op->getOperand(0));
  return context.call(
      kCpuKernels,
      llvm::formatv("sliceCopy({0}, {1}, {2}, {3}, {4})", input,
                    context.result(), elementBytes(op.getResult()),
                    listOf(op.getSliceGeometry()),
                    std::is_same_v<Op, SliceGradOp> ? "true" : "false"));
}

/// On the GPU the slice's start is folded into the pointer to the whole
/// tensor (the input, or slice_grad's result), so the slices of one shape
/// at other starts (an unrolled scan's steps, a gate's quarters) launch one
/// kernel with other site offsets.
template <typename Op>
LogicalResult sliceCuda(Op op, CudaKernelContext &context) {
  constexpr bool grad = std::is_same_v<Op, SliceGradOp>;
  std::array<int64_t, 6> g = op.getSliceGeometry();
  int64_t startElements = g[3] * g[2];
  g[3] = 0;
  if (grad)
    context.zero(op.getResult());
  context.include(kCudaKernels);
  context.launch(
      llvm::formatv("sliceCopy<{0}>({1}, {2}, {3}, {4});",
                    context.elementType(op.getResult()),
                    grad ? context.operand(op->getOperand(0))
                         : context.operandAt(op->getOperand(0), startElements),
                    grad ? context.resultAt(0, startElements)
                         : context.result(),
                    listOf(g), grad ? "true" : "false"),
      ceilDiv(g[0] * g[4] * g[2], kCudaThreads), kCudaThreads);
  return success();
}

LogicalResult concatCpu(ConcatOp op, CpuKernelContext &context) {
  auto inputs = context.operands(op.getInputs());
  context.include(kCpuKernels);
  for (auto [input, pointer, part] :
       llvm::zip(op.getInputs(), inputs, concatParts(op)))
    context.out() << llvm::formatv("  concatPart({0}, {1}, {2}, {3});\n",
                                   pointer, context.result(),
                                   elementBytes(input), listOf(part));
  return success();
}

/// Each part's place along the axis is folded into the result's pointer,
/// as a slice's start is.
LogicalResult concatCuda(ConcatOp op, CudaKernelContext &context) {
  context.include(kCudaKernels);
  for (auto [input, part] : llvm::zip(op.getInputs(), concatParts(op))) {
    int64_t placeElements = part[4] * part[2];
    part[4] = 0;
    context.launch(
        llvm::formatv("concatPart<{0}>({1}, {2}, {3});",
                      context.elementType(input), context.operand(input),
                      context.resultAt(0, placeElements), listOf(part)),
        ceilDiv(part[0] * part[1] * part[2], kCudaThreads), kCudaThreads);
  }
  return success();
}

LogicalResult causalMaskCpu(CausalMaskOp op, CpuKernelContext &context) {
  Shape s = shapeOf(op.getResult());
  return context.call(kCpuKernels, llvm::formatv("causalMask({0}, {1}, {2})",
                                                 context.result(), s[0], s[1]));
}

LogicalResult causalMaskCuda(CausalMaskOp op, CudaKernelContext &context) {
  Shape s = shapeOf(op.getResult());
  context.include(kCudaKernels);
  context.launch(
      llvm::formatv("causalMask({0}, {1}, {2});", context.result(), s[0], s[1]),
      ceilDiv(s[0] * s[1], kCudaThreads), kCudaThreads);
  return success();
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerDataMovementEmissionModels(MLIRContext &context) {
  KernelFunctions<ReshapeOp, copyCpu<ReshapeOp>, copyCuda<ReshapeOp>>::attach(
      context);
  KernelFunctions<TransposeOp, copyCpu<TransposeOp>,
                  copyCuda<TransposeOp>>::attach(context);
  KernelFunctions<BroadcastOp, copyCpu<BroadcastOp>,
                  copyCuda<BroadcastOp>>::attach(context);
  KernelFunctions<SliceOp, sliceCpu<SliceOp>, sliceCuda<SliceOp>>::attach(
      context);
  KernelFunctions<SliceGradOp, sliceCpu<SliceGradOp>,
                  sliceCuda<SliceGradOp>>::attach(context);
  KernelFunctions<ConcatOp, concatCpu, concatCuda>::attach(context);
  KernelFunctions<CausalMaskOp, causalMaskCpu, causalMaskCuda>::attach(context);
}
