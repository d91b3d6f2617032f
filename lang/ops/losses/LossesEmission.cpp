//===- LossesEmission.cpp - Losses in the CPU and CUDA code ---------------===//
//
// The code generation models of cross_entropy, its gradient, accuracy and
// mse: calls of the CPU kernels (LossesKernels.h), and on the GPU one block
// per row (LossesKernels.cuh), the loss and the accuracy then averaged over
// the rows' values in the op's scratch; mse as partial sums per block, then
// their sum in order.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

/// Rows and classes of logits [..., C].
std::pair<int64_t, int64_t> rowsOf(Value logits) {
  ArrayRef<int64_t> shape = llvm::cast<ShapedType>(logits.getType()).getShape();
  return {product(shape) / shape.back(), shape.back()};
}

/// `kernel(operands..., rows, classes, result)` on the CPU.
LogicalResult emitCpu(Operation *op, ValueRange operands, Value logits,
                      const char *kernel, CpuKernelContext &context) {
  auto [rows, classes] = rowsOf(logits);
  std::string arguments;
  for (Value v : operands) {
    FailureOr<std::string> pointer = context.operand(v);
    if (failed(pointer))
      return failure();
    arguments += *pointer + ", ";
  }
  context.include("lang/ops/losses/LossesKernels.h");
  context.out() << llvm::formatv("  {0}({1}{2}, {3}, {4});\n", kernel,
                                 arguments, rows, classes, context.result());
  return success();
}

template <typename Op>
LogicalResult emitLossCpu(Op op, CpuKernelContext &context) {
  const char *kernel = std::is_same_v<Op, CrossEntropyOp> ? "crossEntropy"
                       : std::is_same_v<Op, AccuracyOp>   ? "accuracy"
                                                          : "crossEntropyGrad";
  return emitCpu(op, op->getOperands(), op.getLogits(), kernel, context);
}

/// accuracy's threads for a row of n: a power of two, for the block's tree
/// of comparisons.
int treeThreads(int64_t n) {
  int threads = 32;
  while (threads < 1024 && threads < n)
    threads *= 2;
  return threads;
}

/// cross_entropy and accuracy: one block per row writes the row's value
/// (its loss, its hit) into the op's scratch, then meanOf averages them
/// into the result in a fixed order.
template <typename Op>
LogicalResult emitRowMeanCuda(Op op, CudaKernelContext &context) {
  auto [rows, classes] = rowsOf(op.getLogits());
  constexpr bool loss = std::is_same_v<Op, CrossEntropyOp>;
  int threads = loss ? rowThreads(classes) : treeThreads(classes);
  std::string scratch = context.scratch(rows * 4);
  context.include("lang/ops/losses/LossesKernels.cuh");
  context.launch(
      llvm::formatv("{0}<{1}>({2}{3}, {4}, {5}, {6}, f32({7}));",
                    loss ? "crossEntropyRows" : "accuracyRows",
                    context.elementType(op.getLogits()), loss ? "r, " : "",
                    context.operand(op.getLogits()),
                    context.operand(op.getTargets()), rows, classes, scratch),
      gridFor(rows, 1), threads);
  context.launch(llvm::formatv("meanOf(f32({0}), {1}, {2});", scratch, rows,
                               context.result()),
                 1, 1024);
  return success();
}

LogicalResult emitCrossEntropyGradCuda(CrossEntropyGradOp op,
                                       CudaKernelContext &context) {
  auto [rows, classes] = rowsOf(op.getLogits());
  context.include("lang/ops/losses/LossesKernels.cuh");
  context.launch(
      llvm::formatv(
          "crossEntropyGrad<{0}>(r, {1}, {2}, {3}, {4}, {5}, {6});",
          context.elementType(op.getLogits()), context.operand(op.getGrad()),
          context.operand(op.getLogits()), context.operand(op.getTargets()),
          rows, classes, context.result()),
      gridFor(rows, 1), rowThreads(classes));
  return success();
}

LogicalResult emitMseCpu(MseOp op, CpuKernelContext &context) {
  FailureOr<std::string> a = context.operand(op.getLhs()),
                         b = context.operand(op.getRhs());
  if (failed(a) || failed(b))
    return failure();
  context.include("lang/ops/losses/LossesKernels.h");
  context.out() << llvm::formatv("  mse({0}, {1}, {2}, {3});\n", *a, *b,
                                 product(shapeOf(op.getLhs())),
                                 context.result());
  return success();
}

LogicalResult emitMseCuda(MseOp op, CudaKernelContext &context) {
  int64_t n = product(shapeOf(op.getLhs())), blocks = op.getCudaBlocks();
  std::string partial = "f32(" + context.scratch(blocks * 4) + ")";
  context.include("lang/ops/losses/LossesKernels.cuh");
  context.launch(llvm::formatv("squaredErrorPartial<{0}>({1}, {2}, {3}, {4});",
                               context.elementType(op.getLhs()),
                               context.operand(op.getLhs()),
                               context.operand(op.getRhs()), n, partial),
                 blocks, kCudaThreads);
  context.launch(llvm::formatv("finishSumOfSquares({0}, {1}, {2}, false, "
                               "{3});",
                               partial, blocks, floatLiteral(1.0 / double(n)),
                               context.result()),
                 1, 1024);
  return success();
}

} // namespace

namespace mnemo {
namespace codegen {
/// Called by registerFamilyEmissionModels (generated).
void registerLossesEmissionModels(MLIRContext &context) {
  KernelFunctions<MseOp, emitMseCpu, emitMseCuda>::attach(context);
  KernelFunctions<CrossEntropyOp, emitLossCpu<CrossEntropyOp>,
                  emitRowMeanCuda<CrossEntropyOp>>::attach(context);
  KernelFunctions<CrossEntropyGradOp, emitLossCpu<CrossEntropyGradOp>,
                  emitCrossEntropyGradCuda>::attach(context);
  KernelFunctions<AccuracyOp, emitLossCpu<AccuracyOp>,
                  emitRowMeanCuda<AccuracyOp>>::attach(context);
}
} // namespace codegen
} // namespace mnemo
