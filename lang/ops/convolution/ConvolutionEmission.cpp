//===- ConvolutionEmission.cpp - Convolutions in the CPU and CUDA code ----===//
//
// The code generation models of conv2d and its backward ops: on the CPU a
// call of the im2col kernels (ConvolutionKernels.h) with the geometry as a
// static ConvShape and the workspace the op declares; on the GPU one cuDNN
// call (CudaKernelContext::convolution).
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

/// What each op computes: the CPU kernel's name and its kind for the
/// 16-bit path (0, 1, 2), and cuDNN's kind.
struct ConvKindNames {
  const char *kernel;
  int halfKind;
  const char *cudnn;
};

template <typename Op> constexpr ConvKindNames kindOf() {
  if constexpr (std::is_same_v<Op, Conv2DOp>)
    return {"conv2d", 0, "Forward"};
  else if constexpr (std::is_same_v<Op, Conv2DInputGradOp>)
    return {"conv2dInputGrad", 1, "InputGrad"};
  else
    return {"conv2dWeightGrad", 2, "WeightGrad"};
}

template <typename Op>
LogicalResult emitConvolutionCpu(Op op, CpuKernelContext &context) {
  constexpr ConvKindNames kind = kindOf<Op>();
  ConvGeometry g = op.getConvGeometry();
  FailureOr<std::string> first = context.operand(op->getOperand(0));
  FailureOr<std::string> second = context.operand(op->getOperand(1));
  FailureOr<std::string> workspace =
      context.workspace(op.getCpuWorkspaceBytes());
  if (failed(first) || failed(second) || failed(workspace))
    return failure();
  context.include("lang/ops/convolution/ConvolutionKernels.h");
  // 16-bit storage: widened around the f32 kernel.
  std::string call =
      ctypeOf(op->getResult(0).getType()).isHalf
          ? llvm::formatv("conv2dHalf({0}, ", kind.halfKind).str()
          : std::string(kind.kernel) + "(";
  context.out() << llvm::formatv(
      "  {{\n    static const ConvShape conv = {{{0}, {1}, {2}, {3}, {4}, {5}, "
      "{6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}};\n    {14}conv, {15}, "
      "{16}, {17}, {18});\n  }\n",
      g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.ho, g.wo, g.strideH, g.strideW,
      g.padH, g.padW, g.imagesPerGemm, call, *first, *second, context.result(),
      *workspace);
  return success();
}

template <typename Op>
LogicalResult emitConvolutionCuda(Op op, CudaKernelContext &context) {
  context.convolution({kindOf<Op>().cudnn, op->getOperand(0), op->getOperand(1),
                       op->getResult(0), op.getConvGeometry()});
  return success();
}

} // namespace

namespace mnemo {
namespace codegen {
/// Called by registerFamilyEmissionModels (generated).
void registerConvolutionEmissionModels(MLIRContext &context) {
  KernelFunctions<Conv2DOp, emitConvolutionCpu<Conv2DOp>,
                  emitConvolutionCuda<Conv2DOp>>::attach(context);
  KernelFunctions<Conv2DInputGradOp, emitConvolutionCpu<Conv2DInputGradOp>,
                  emitConvolutionCuda<Conv2DInputGradOp>>::attach(context);
  KernelFunctions<Conv2DWeightGradOp, emitConvolutionCpu<Conv2DWeightGradOp>,
                  emitConvolutionCuda<Conv2DWeightGradOp>>::attach(context);
}
} // namespace codegen
} // namespace mnemo
