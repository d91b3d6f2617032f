//===- EmbeddingEmission.cpp - Embeddings in the CPU and CUDA code --------===//
//
// The code generation models of embedding and embedding_grad: calls of the
// CPU kernels (EmbeddingKernels.h), and on the GPU one thread per element
// (EmbeddingKernels.cuh), the gradient's table zeroed by the host first.
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

/// The row gather's or scatter's sizes: index count, table rows, row length.
struct EmbeddingSizes {
  int64_t count, rows, dim;
};

EmbeddingSizes sizesOf(Value indices, Value table) {
  ArrayRef<int64_t> shape = llvm::cast<ShapedType>(table.getType()).getShape();
  return {product(llvm::cast<ShapedType>(indices.getType()).getShape()),
          shape[0], shape[1]};
}

/// `first` is the table (the gather) or the rows' gradients (the scatter).
template <typename Op>
LogicalResult emitCpu(Op op, Value first, Value table, const char *kernel,
                      CpuKernelContext &context) {
  EmbeddingSizes s = sizesOf(op.getIndices(), table);
  std::string values = context.operand(first),
              indices = context.operand(op.getIndices());
  return context.call("lang/ops/embedding/EmbeddingKernels.h",
                      llvm::formatv("{0}({1}, {2}, {3}, {4}, {5}, {6})", kernel,
                                    values, indices, s.count, s.rows, s.dim,
                                    context.result()));
}

LogicalResult emitEmbeddingCpu(EmbeddingOp e, CpuKernelContext &context) {
  return emitCpu(e, e.getTable(), e.getTable(), "embedding", context);
}

/// The scatter-add sums in f32: the gradient rule gives a 16-bit table f32
/// sums and a cast (EmbeddingOps.cpp), so only IR written by hand reaches
/// the kernels with another type.
template <typename Context>
LogicalResult checkF32Sums(EmbeddingGradOp e, Context &context) {
  for (Value v : {e.getGrad(), e.getResult()})
    if (!llvm::cast<ShapedType>(v.getType()).getElementType().isF32())
      return context.error("an embedding gradient sums in f32; a " +
                           dtypeName(v.getType()) +
                           " one is not supported (the gradient rule of a "
                           "16-bit embedding sums in f32 and casts)");
  return success();
}

LogicalResult emitEmbeddingGradCpu(EmbeddingGradOp e,
                                   CpuKernelContext &context) {
  if (failed(checkF32Sums(e, context)))
    return failure();
  return emitCpu(e, e.getGrad(), e.getResult(), "embeddingGrad", context);
}

LogicalResult emitEmbeddingCuda(EmbeddingOp e, CudaKernelContext &context) {
  EmbeddingSizes s = sizesOf(e.getIndices(), e.getTable());
  context.include("lang/ops/embedding/EmbeddingKernels.cuh");
  context.launch(
      llvm::formatv("embedding<{0}>(r, {1}, {2}, {3}, {4}, {5}, {6});",
                    context.elementType(e.getTable()),
                    context.operand(e.getTable()),
                    context.operand(e.getIndices()), s.count, s.rows, s.dim,
                    context.result()),
      ceilDiv(s.count * s.dim, kCudaThreads), kCudaThreads);
  return success();
}

LogicalResult emitEmbeddingGradCuda(EmbeddingGradOp e,
                                    CudaKernelContext &context) {
  EmbeddingSizes s = sizesOf(e.getIndices(), e.getResult());
  if (failed(checkF32Sums(e, context)))
    return failure();
  context.include("lang/ops/embedding/EmbeddingKernels.cuh");
  context.zero(e.getResult());
  context.launch(
      llvm::formatv("embeddingGradScatter({0}, {1}, {2}, {3}, {4}, {5});",
                    context.operand(e.getGrad()),
                    context.operand(e.getIndices()), s.count, s.rows, s.dim,
                    context.result()),
      ceilDiv(s.count * s.dim, kCudaThreads), kCudaThreads);
  return success();
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerEmbeddingEmissionModels(MLIRContext &context) {
  KernelFunctions<EmbeddingOp, emitEmbeddingCpu, emitEmbeddingCuda>::attach(
      context);
  KernelFunctions<EmbeddingGradOp, emitEmbeddingGradCpu,
                  emitEmbeddingGradCuda>::attach(context);
}
