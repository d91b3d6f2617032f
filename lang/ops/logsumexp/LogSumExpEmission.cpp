//===- LogSumExpEmission.cpp - logsumexp in the CPU and CUDA code ---------===//
//
// The code generation models of mnemo.logsumexp: a call of the CPU kernel
// (LogSumExpKernels.h), and on the GPU one block per row when the reduced
// axis is innermost, one thread per row otherwise (LogSumExpKernels.cuh).
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "lang/MnemoOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

LogicalResult emitLogSumExpCpu(LogSumExpOp op, CpuKernelContext &context) {
  auto [outer, n, inner] = op.getRowGeometry();
  std::string input = context.operand(op.getInput());
  return context.call("lang/ops/logsumexp/LogSumExpKernels.h",
                      llvm::formatv("logSumExp({0}, {1}, {2}, {3}, {4})", input,
                                    context.result(), outer, n, inner));
}

LogicalResult emitLogSumExpCuda(LogSumExpOp op, CudaKernelContext &context) {
  auto [outer, n, inner] = op.getRowGeometry();
  std::string type = context.elementType(op.getInput());
  std::string input = context.operand(op.getInput());
  context.include("lang/ops/logsumexp/LogSumExpKernels.cuh");
  if (inner == 1)
    context.launch(llvm::formatv("logSumExpRows<{0}>({1}, {2}, {3}, {4});",
                                 type, input, context.result(), outer, n),
                   gridFor(outer, 1), rowThreads(n));
  else
    context.launch(
        llvm::formatv("logSumExpStrided<{0}>({1}, {2}, {3}, {4}, {5});", type,
                      input, context.result(), outer, n, inner),
        ceilDiv(outer * inner, kCudaThreads), kCudaThreads);
  return success();
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerLogSumExpEmissionModels(MLIRContext &context) {
  KernelFunctions<LogSumExpOp, emitLogSumExpCpu, emitLogSumExpCuda>::attach(
      context);
}
