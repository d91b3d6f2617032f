//===- DataMovementEmission.cpp - Data movement in the CPU and CUDA code --===//
//
// The code generation models of slice, slice_grad, concat and causal_mask:
// calls of the CPU row copies (DataMovementKernels.h), and on the GPU one
// kernel of DataMovementKernels.cuh per op (per input for concat), a
// thread per element moved. slice_grad's zeros: the CPU kernel clears its
// result, the CUDA emitter clears it on the host side before the launch.
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
struct SliceCpuModel
    : CpuKernelOpInterface::ExternalModel<SliceCpuModel<Op>, Op> {
  LogicalResult emitCpuKernel(Operation *operation,
                              CpuKernelContext &context) const {
    auto op = llvm::cast<Op>(operation);
    FailureOr<std::string> input = context.operand(op->getOperand(0));
    if (failed(input))
      return failure();
    context.include(kCpuKernels);
    context.out() << llvm::formatv(
        "  sliceCopy({0}, {1}, {2}, {3}, {4});\n", *input, context.result(),
        elementBytes(op.getResult()), listOf(op.getSliceGeometry()),
        std::is_same_v<Op, SliceGradOp> ? "true" : "false");
    return success();
  }
};

template <typename Op>
struct SliceCudaModel
    : CudaKernelOpInterface::ExternalModel<SliceCudaModel<Op>, Op> {
  LogicalResult emitCudaKernel(Operation *operation,
                               CudaKernelContext &context) const {
    auto op = llvm::cast<Op>(operation);
    constexpr bool grad = std::is_same_v<Op, SliceGradOp>;
    std::array<int64_t, 6> g = op.getSliceGeometry();
    if (grad)
      context.zero(op.getResult());
    context.include(kCudaKernels);
    context.launch(llvm::formatv("sliceCopy<{0}>({1}, {2}, {3}, {4});",
                                 context.elementType(op.getResult()),
                                 context.operand(op->getOperand(0)),
                                 context.result(), listOf(g),
                                 grad ? "true" : "false"),
                   ceilDiv(g[0] * g[4] * g[2], kCudaThreads), kCudaThreads);
    return success();
  }
};

struct ConcatCpuModel
    : CpuKernelOpInterface::ExternalModel<ConcatCpuModel, ConcatOp> {
  LogicalResult emitCpuKernel(Operation *operation,
                              CpuKernelContext &context) const {
    auto op = llvm::cast<ConcatOp>(operation);
    context.include(kCpuKernels);
    SmallVector<std::array<int64_t, 5>> parts = concatParts(op);
    for (auto [input, part] : llvm::zip(op.getInputs(), parts)) {
      FailureOr<std::string> pointer = context.operand(input);
      if (failed(pointer))
        return failure();
      context.out() << llvm::formatv("  concatPart({0}, {1}, {2}, {3});\n",
                                     *pointer, context.result(),
                                     elementBytes(input), listOf(part));
    }
    return success();
  }
};

struct ConcatCudaModel
    : CudaKernelOpInterface::ExternalModel<ConcatCudaModel, ConcatOp> {
  LogicalResult emitCudaKernel(Operation *operation,
                               CudaKernelContext &context) const {
    auto op = llvm::cast<ConcatOp>(operation);
    context.include(kCudaKernels);
    SmallVector<std::array<int64_t, 5>> parts = concatParts(op);
    for (auto [input, part] : llvm::zip(op.getInputs(), parts))
      context.launch(
          llvm::formatv("concatPart<{0}>({1}, {2}, {3});",
                        context.elementType(input), context.operand(input),
                        context.result(), listOf(part)),
          ceilDiv(part[0] * part[1] * part[2], kCudaThreads), kCudaThreads);
    return success();
  }
};

struct CausalMaskCpuModel
    : CpuKernelOpInterface::ExternalModel<CausalMaskCpuModel, CausalMaskOp> {
  LogicalResult emitCpuKernel(Operation *operation,
                              CpuKernelContext &context) const {
    Shape s = shapeOf(operation->getResult(0));
    context.include(kCpuKernels);
    context.out() << llvm::formatv("  causalMask({0}, {1}, {2});\n",
                                   context.result(), s[0], s[1]);
    return success();
  }
};

struct CausalMaskCudaModel
    : CudaKernelOpInterface::ExternalModel<CausalMaskCudaModel, CausalMaskOp> {
  LogicalResult emitCudaKernel(Operation *operation,
                               CudaKernelContext &context) const {
    Shape s = shapeOf(operation->getResult(0));
    context.include(kCudaKernels);
    context.launch(llvm::formatv("causalMask({0}, {1}, {2});", context.result(),
                                 s[0], s[1]),
                   ceilDiv(s[0] * s[1], kCudaThreads), kCudaThreads);
    return success();
  }
};

} // namespace

namespace mnemo {
namespace codegen {
/// Called by registerFamilyEmissionModels (generated).
void registerDataMovementEmissionModels(MLIRContext &context) {
  SliceOp::attachInterface<SliceCpuModel<SliceOp>, SliceCudaModel<SliceOp>>(
      context);
  SliceGradOp::attachInterface<SliceCpuModel<SliceGradOp>,
                               SliceCudaModel<SliceGradOp>>(context);
  ConcatOp::attachInterface<ConcatCpuModel, ConcatCudaModel>(context);
  CausalMaskOp::attachInterface<CausalMaskCpuModel, CausalMaskCudaModel>(
      context);
}
} // namespace codegen
} // namespace mnemo
