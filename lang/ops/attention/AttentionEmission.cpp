//===- AttentionEmission.cpp - Fused attention in the CPU and CUDA code ---===//
//
// The code generation models of attention and attention_grad: calls of the
// CPU kernels (AttentionKernels.h) with the op's geometry and its planned
// workspace, and on the GPU launches of Mnemo's tiled kernels
// (AttentionKernels.cuh), instantiated for the smallest head-dimension
// bound that holds the op's (64, 128 or 256) and the tile that keeps two
// tiles in 32 KiB of shared memory. A 16-bit attention without a mask
// operand first offers itself to cuDNN's flash-attention engines
// (AttentionCudnn.h); Mnemo's launches are the else branch.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"
#include "lang/ops/attention/AttentionKernels.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;
using attention::AttentionGeometry;

namespace {

constexpr const char *kCpuKernels = "lang/ops/attention/AttentionKernels.h";
constexpr const char *kCudaKernels = "lang/ops/attention/AttentionKernels.cuh";

/// The geometry as the aggregate the kernels take (AttentionFormulas.h's
/// field order).
std::string geometryLiteral(const AttentionGeometry &g) {
  return llvm::formatv("mnemo::attention::AttentionGeometry{{{0}, {1}, {2}, "
                       "{3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, "
                       "{13}, {14}, {15}}",
                       g.batch, g.heads, g.kvHeads, g.queries, g.keys,
                       g.headDim, g.valueDim, g.causal ? "true" : "false",
                       doubleLiteral(g.scale), doubleLiteral(g.dropoutP),
                       g.seed, g.maskKind, g.maskBatchStride, g.maskHeadStride,
                       g.maskQueryStride, g.maskKeyStride)
      .str();
}

/// The mask's pointer, or a typed null (the kernels deduce its type).
std::string cpuMask(Value mask, CpuKernelContext &context) {
  return mask ? context.operand(mask) : "static_cast<const float *>(nullptr)";
}

LogicalResult emitForwardCpu(AttentionOp op, CpuKernelContext &context) {
  std::vector<std::string> in =
      context.operands({op.getQuery(), op.getKey(), op.getValue()});
  std::string mask = cpuMask(op.getMask(), context),
              workspace = context.workspace(op.getCpuWorkspaceBytes());
  return context.call(
      kCpuKernels,
      llvm::formatv(
          "attentionForward({0}, {1}, {2}, {3}, {4}, {5}, {6}, dropoutStep, "
          "{7})",
          in[0], in[1], in[2], mask, context.result(0), context.result(1),
          geometryLiteral(op.getGeometry()), workspace));
}

LogicalResult emitBackwardCpu(AttentionGradOp op, CpuKernelContext &context) {
  std::vector<std::string> in =
      context.operands({op.getQuery(), op.getKey(), op.getValue(),
                        op.getOutput(), op.getLogSumExp(), op.getGradOutput()});
  std::string mask = cpuMask(op.getMask(), context),
              workspace = context.workspace(op.getCpuWorkspaceBytes());
  return context.call(
      kCpuKernels,
      llvm::formatv("attentionBackward({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                    "{8}, {9}, {10}, dropoutStep, {11})",
                    in[0], in[1], in[2], in[3], in[4], in[5], mask,
                    context.result(0), context.result(1), context.result(2),
                    geometryLiteral(op.getGeometry()), workspace));
}

/// The kernels' template bounds: the head-dimension bound and the tile of
/// rows staged in shared memory (two tiles of tile x bound floats in
/// 32 KiB); failure past 256.
struct CudaBounds {
  int maxDim = 0, tile = 0;
};
FailureOr<CudaBounds> cudaBounds(const AttentionGeometry &g,
                                 CudaKernelContext &context) {
  int64_t dim = std::max(g.headDim, g.valueDim);
  for (int bound : {64, 128, 256})
    if (dim <= bound)
      return CudaBounds{bound, 4096 / bound};
  context.error("head dimension " + std::to_string(dim) +
                " is larger than the CUDA attention kernels take (256)");
  return failure();
}

std::string maskType(Value mask, CudaKernelContext &context) {
  return mask ? context.elementType(mask) : "float";
}

bool onCudnn(const AttentionGeometry &g, Value query) {
  return attention::cudnnCandidate(
      g, llvm::cast<ShapedType>(query.getType()).getElementTypeBitWidth());
}

LogicalResult emitForwardCuda(AttentionOp op, CudaKernelContext &context) {
  AttentionGeometry g = op.getGeometry();
  FailureOr<CudaBounds> bounds = cudaBounds(g, context);
  if (failed(bounds))
    return failure();
  context.include(kCudaKernels);
  std::string type = context.elementType(op.getQuery());
  bool cudnn = onCudnn(g, op.getQuery());
  if (cudnn) {
    context.cudnnAttentionOrElse({/*forward=*/true,
                                  op.getQuery(),
                                  op.getKey(),
                                  op.getValue(),
                                  op.getResult(),
                                  op.getLogSumExp(),
                                  {},
                                  {},
                                  {},
                                  {},
                                  g});
  }
  context.launch(
      llvm::formatv("attentionForward<{0}, {1}, {2}, {3}>({4}, {5}, {6}, {7}, "
                    "{8}, {9}, {10}, r.control[kDropoutStep]);",
                    type, maskType(op.getMask(), context), bounds->maxDim,
                    bounds->tile, context.operand(op.getQuery()),
                    context.operand(op.getKey()),
                    context.operand(op.getValue()),
                    op.getMask() ? context.operand(op.getMask()) : "nullptr",
                    context.result(0), context.result(1), geometryLiteral(g)),
      ceilDiv(g.queries, attention::cudaRowsPerBlock(bounds->maxDim)),
      attention::kCudaAttentionThreads, g.batch * g.heads);
  if (cudnn)
    context.hostCode("}");
  return success();
}

LogicalResult emitBackwardCuda(AttentionGradOp op, CudaKernelContext &context) {
  AttentionGeometry g = op.getGeometry();
  FailureOr<CudaBounds> bounds = cudaBounds(g, context);
  if (failed(bounds))
    return failure();
  context.include(kCudaKernels);
  std::string type = context.elementType(op.getQuery());
  std::string mask = op.getMask() ? context.operand(op.getMask()) : "nullptr";
  std::string templateArgs =
      llvm::formatv("{0}, {1}, {2}, {3}", type, maskType(op.getMask(), context),
                    bounds->maxDim, bounds->tile);
  std::string delta = "f32(" + context.scratch(op.getCudaScratchBytes()) + ")";
  std::string q = context.operand(op.getQuery()),
              k = context.operand(op.getKey()),
              v = context.operand(op.getValue()),
              lse = context.operand(op.getLogSumExp()),
              dOut = context.operand(op.getGradOutput()),
              geometry = geometryLiteral(g);
  int rows = attention::cudaRowsPerBlock(bounds->maxDim);
  int threads = attention::kCudaAttentionThreads;
  int64_t queryRows = g.batch * g.heads * g.queries;
  bool cudnn = onCudnn(g, op.getQuery());
  if (cudnn) {
    context.cudnnAttentionOrElse(
        {/*forward=*/false, op.getQuery(), op.getKey(), op.getValue(),
         op.getOutput(), op.getLogSumExp(), op.getGradOutput(),
         op->getResult(0), op->getResult(1), op->getResult(2), g});
  }
  context.launch(llvm::formatv("attentionBackwardDelta<{0}>({1}, {2}, {3}, "
                               "{4}, {5});",
                               type, context.operand(op.getOutput()), dOut,
                               delta, queryRows, g.valueDim),
                 ceilDiv(queryRows, kCudaThreads), kCudaThreads);
  context.launch(
      llvm::formatv("attentionBackwardKeys<{0}>({1}, {2}, {3}, {4}, {5}, {6}, "
                    "{7}, {8}, {9}, {10}, r.control[kDropoutStep]);",
                    templateArgs, q, k, v, lse, delta, dOut, mask,
                    context.result(1), context.result(2), geometry),
      ceilDiv(g.keys, rows), threads, g.batch * g.kvHeads);
  context.launch(
      llvm::formatv("attentionBackwardQueries<{0}>({1}, {2}, {3}, {4}, {5}, "
                    "{6}, {7}, {8}, {9}, r.control[kDropoutStep]);",
                    templateArgs, q, k, v, lse, delta, dOut, mask,
                    context.result(0), geometry),
      ceilDiv(g.queries, rows), threads, g.batch * g.heads);
  if (cudnn)
    context.hostCode("}");
  return success();
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerAttentionEmissionModels(MLIRContext &context) {
  KernelFunctions<AttentionOp, emitForwardCpu, emitForwardCuda>::attach(
      context);
  KernelFunctions<AttentionGradOp, emitBackwardCpu, emitBackwardCuda>::attach(
      context);
}
