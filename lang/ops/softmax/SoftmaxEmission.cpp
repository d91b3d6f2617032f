//===- SoftmaxEmission.cpp - softmax in the CPU and CUDA code -------------===//
//
// The code generation models of softmax and log_softmax: a call of the CPU
// kernel (SoftmaxKernels.h), and on the GPU one block per row when the axis
// is innermost, one thread per row otherwise (SoftmaxKernels.cuh).
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "lang/MnemoOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

template <typename Op, bool Logarithm>
LogicalResult emitSoftmaxCpu(Op op, CpuKernelContext &context) {
  auto [outer, n, inner] = op.getRowGeometry();
  std::string input = context.operand(op.getInput());
  return context.call(
      "lang/ops/softmax/SoftmaxKernels.h",
      llvm::formatv("softmaxAlongAxis({0}, {1}, {2}, {3}, {4}, {5})", input,
                    context.result(), outer, n, inner,
                    Logarithm ? "true" : "false"));
}

template <typename Op, bool Logarithm>
LogicalResult emitSoftmaxCuda(Op op, CudaKernelContext &context) {
  auto [outer, n, inner] = op.getRowGeometry();
  std::string type = context.elementType(op.getInput());
  std::string input = context.operand(op.getInput());
  const char *logarithm = Logarithm ? "true" : "false";
  context.include("lang/ops/softmax/SoftmaxKernels.cuh");
  if (inner == 1)
    context.launch(llvm::formatv("softmaxRows<{0}>({1}, {2}, {3}, {4}, {5});",
                                 type, input, context.result(), outer, n,
                                 logarithm),
                   gridFor(outer, 1), rowThreads(n));
  else
    context.launch(
        llvm::formatv("softmaxStrided<{0}>({1}, {2}, {3}, {4}, {5}, {6});",
                      type, input, context.result(), outer, n, inner,
                      logarithm),
        ceilDiv(outer * inner, kCudaThreads), kCudaThreads);
  return success();
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerSoftmaxEmissionModels(MLIRContext &context) {
  KernelFunctions<SoftmaxOp, emitSoftmaxCpu<SoftmaxOp, false>,
                  emitSoftmaxCuda<SoftmaxOp, false>>::attach(context);
  KernelFunctions<LogSoftmaxOp, emitSoftmaxCpu<LogSoftmaxOp, true>,
                  emitSoftmaxCuda<LogSoftmaxOp, true>>::attach(context);
}
