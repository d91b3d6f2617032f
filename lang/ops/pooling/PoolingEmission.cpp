//===- PoolingEmission.cpp - Pooling in the CPU and CUDA code -------------===//
//
// The code generation models of the pooling ops: a call of the CPU kernels
// (PoolingKernels.h, templates over the storage type) with a static
// PoolShape, and on the GPU one kernel of PoolingKernels.cuh, a thread per
// output (forward) or per input (gradients).
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

template <typename Op>
constexpr bool isMax =
    std::is_same_v<Op, MaxPool2DOp> || std::is_same_v<Op, MaxPool2DGradOp>;
template <typename Op>
constexpr bool isGrad =
    std::is_same_v<Op, MaxPool2DGradOp> || std::is_same_v<Op, AvgPool2DGradOp>;

/// The operands after the shape, in the kernels' order: (x) for a forward,
/// (dy, x) for max's gradient, (dy) for average's.
template <typename Op, typename Context>
std::string operandsOf(Op op, Context &context) {
  std::string list;
  for (Value v : op->getOperands())
    list += context.operand(v) + ", ";
  return list;
}

template <typename Op>
LogicalResult emitPoolCpu(Op op, CpuKernelContext &context) {
  const char *name = isMax<Op>    ? (isGrad<Op> ? "maxPool2dGrad" : "maxPool2d")
                     : isGrad<Op> ? "avgPool2dGrad"
                                  : "avgPool2d";
  context.include("lang/ops/pooling/PoolingKernels.h");
  context.out() << llvm::formatv(
      "  {\n    static const PoolShape pool = {{{0}};\n    {1}(pool, "
      "{2}{3});\n  }\n",
      listOf(op.getPoolGeometry()), name, operandsOf(op, context),
      context.result());
  return success();
}

template <typename Op>
LogicalResult emitPoolCuda(Op op, CudaKernelContext &context) {
  std::string type = context.elementType(op.getResult());
  std::string operands = operandsOf(op, context);
  // Average pooling's gradient reads no input.
  if (isGrad<Op> && !isMax<Op>)
    operands += "(const " + type + " *)nullptr, ";
  // One thread per element written: outputs, or inputs for a gradient.
  int64_t work = product(shapeOf(op.getResult()));
  context.include("lang/ops/pooling/PoolingKernels.cuh");
  context.launch(
      llvm::formatv(
          "const PoolShape shape = {{{0}};\n  {1}<{2}, {3}>(shape, "
          "{4}{5});",
          listOf(op.getPoolGeometry()), isGrad<Op> ? "pool2dGrad" : "pool2d",
          isMax<Op> ? "true" : "false", type, operands, context.result()),
      ceilDiv(work, kCudaThreads), kCudaThreads);
  return success();
}

template <typename Op> void attach(MLIRContext &context) {
  KernelFunctions<Op, emitPoolCpu<Op>, emitPoolCuda<Op>>::attach(context);
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerPoolingEmissionModels(MLIRContext &context) {
  attach<MaxPool2DOp>(context);
  attach<AvgPool2DOp>(context);
  attach<MaxPool2DGradOp>(context);
  attach<AvgPool2DGradOp>(context);
}
