//===- ConvolutionEmission.cpp - Convolutions in the CPU and CUDA code ----===//
//
// The code generation models of conv2d and its backward ops: on the CPU a
// ConvSite of the generated file (oneDNN's primitive, or im2col;
// ConvolutionKernels.h, in f32 or 16-bit storage) run on the workspace the
// op declares; on the GPU one cuDNN call (CudaKernelContext::convolution).
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"
#include "lang/PlanAttributes.h"

#include "llvm/Support/FormatVariadic.h"

#include <type_traits>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

/// What each op computes: its ConvKind on the CPU and cuDNN's kind.
struct ConvKindNames {
  const char *site; // ConvKind
  const char *cudnn;
};

template <typename Op> constexpr ConvKindNames kindOf() {
  if constexpr (std::is_same_v<Op, Conv2DOp>)
    return {"Forward", "Forward"};
  else if constexpr (std::is_same_v<Op, Conv2DInputGradOp>)
    return {"InputGrad", "InputGrad"};
  else
    return {"WeightGrad", "WeightGrad"};
}

template <typename Op>
LogicalResult emitConvolutionCpu(Op op, CpuKernelContext &context) {
  constexpr ConvKindNames kind = kindOf<Op>();
  ConvGeometry g = op.getConvGeometry();
  std::string first = context.operand(op->getOperand(0)),
              second = context.operand(op->getOperand(1)),
              workspace = context.workspace(op.getCpuWorkspaceBytes());
  context.include("lang/ops/convolution/ConvolutionKernels.h");
  std::string shape = llvm::formatv(
      "{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, "
      "{13}}",
      g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.ho, g.wo, g.strideH, g.strideW,
      g.padH, g.padW, g.imagesPerGemm);
  // A site set up before the first step: oneDNN's primitive where the
  // trainer has oneDNN (for 16-bit storage, where this CPU has a fast
  // one), else im2col (around widened operands for 16-bit storage). The
  // activations the plan keeps in blocks of channels.
  bool blocked[3] = {plan::isChannelBlocked(op->getOperand(0)),
                     plan::isChannelBlocked(op->getOperand(1)),
                     plan::isChannelBlocked(op->getResult(0))};
  std::string options;
  CType element = ctypeOf(op->getResult(0).getType());
  if (blocked[0] || blocked[1] || blocked[2] || element.isHalf)
    options = llvm::formatv(", ConvLayouts{{{0}, {1}, {2}}", blocked[0],
                            blocked[1], blocked[2]);
  if (element.isHalf)
    options +=
        element.name == "bf16_t" ? ", ConvData::BF16" : ", ConvData::F16";
  std::string site = context.fileScopeObject(
      "ConvSite", llvm::formatv("ConvShape{0}, ConvKind::{1}, {2}{3}", shape,
                                kind.site, op.getCpuWorkspaceBytes(), options)
                      .str());
  context.out() << llvm::formatv("  {0}.run({1}, {2}, {3}, {4});\n", site,
                                 first, second, context.result(), workspace);
  return success();
}

template <typename Op>
LogicalResult emitConvolutionCuda(Op op, CudaKernelContext &context) {
  context.convolution({kindOf<Op>().cudnn, op->getOperand(0), op->getOperand(1),
                       op->getResult(0), op.getConvGeometry()});
  return success();
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerConvolutionEmissionModels(MLIRContext &context) {
  KernelFunctions<Conv2DOp, emitConvolutionCpu<Conv2DOp>,
                  emitConvolutionCuda<Conv2DOp>>::attach(context);
  KernelFunctions<Conv2DInputGradOp, emitConvolutionCpu<Conv2DInputGradOp>,
                  emitConvolutionCuda<Conv2DInputGradOp>>::attach(context);
  KernelFunctions<Conv2DWeightGradOp, emitConvolutionCpu<Conv2DWeightGradOp>,
                  emitConvolutionCuda<Conv2DWeightGradOp>>::attach(context);
}
