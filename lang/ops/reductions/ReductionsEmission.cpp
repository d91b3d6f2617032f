//===- ReductionsEmission.cpp - Reductions in the CPU and CUDA code -------===//
//
// The code generation models of sum, mean, max and max_grad: a call of the
// CPU kernels (ReductionsKernels.h) with the input's shape and the reduced
// axes as a bit mask, and on the GPU (ReductionsKernels.cuh) the input seen
// as kept and reduced groups of dimensions, reduced by one of three schemes
// that the shape picks.
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

constexpr const char *kCpuKernels = "lang/ops/reductions/ReductionsKernels.h";
constexpr const char *kCudaKernels =
    "lang/ops/reductions/ReductionsKernels.cuh";

template <typename Op> constexpr const char *cpuKind() {
  return std::is_same_v<Op, SumOp>    ? "ReduceKind::Sum"
         : std::is_same_v<Op, MeanOp> ? "ReduceKind::Mean"
                                      : "ReduceKind::Max";
}
template <typename Op> constexpr const char *cudaKind() {
  return std::is_same_v<Op, SumOp>    ? "kSum"
         : std::is_same_v<Op, MeanOp> ? "kMean"
                                      : "kMax";
}

template <typename Op>
LogicalResult emitReduceCpu(Op op, CpuKernelContext &context) {
  Shape in = shapeOf(op.getInput());
  std::string input = context.operand(op.getInput());
  std::string prefix;
  if constexpr (std::is_same_v<Op, MaxGradOp>) {
    std::string grad = context.operand(op.getGrad()),
                maximum = context.operand(op.getMaximum());
    prefix = llvm::formatv("maxGrad({0}, {1}, {2}", grad, input, maximum);
  } else {
    prefix = llvm::formatv("reduce({0}, {1}", cpuKind<Op>(), input);
  }
  return context.call(kCpuKernels,
                      llvm::formatv("{0}, {1}, {2}, {3}u, {4})", prefix,
                                    context.constantArray(in), in.size(),
                                    op.getReducedMask(), context.result()));
}

/// The input as kept and reduced groups of dimensions (neighbours of the
/// same kind merged, size-1 dimensions dropped), as ReductionsKernels.cuh's
/// ReduceShape initializer.
struct ReduceGroups {
  Shape kept, keptStrides, reduced, reducedStrides;

  ReduceGroups(const Shape &in, uint32_t mask) {
    Shape strides = rowMajorStrides(in);
    int lastKind = -1;
    for (size_t d = 0; d < in.size(); ++d) {
      int isReduced = (mask >> d) & 1;
      Shape &dims = isReduced ? reduced : kept;
      Shape &s = isReduced ? reducedStrides : keptStrides;
      if (in[d] == 1)
        continue;
      if (lastKind == isReduced && !dims.empty()) {
        dims.back() *= in[d];
        s.back() = strides[d];
      } else {
        dims.push_back(in[d]);
        s.push_back(strides[d]);
      }
      lastKind = isReduced;
    }
  }
  int64_t outputs() const { return product(kept); }
  int64_t perOutput() const { return product(reduced); }
  bool fits() const { return kept.size() <= 4 && reduced.size() <= 4; }
  std::string initializer() const {
    auto array = [](const Shape &values) {
      Shape padded = values;
      padded.resize(4, 0);
      return "{" + listOf(padded) + "}";
    };
    return llvm::formatv("{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}",
                         kept.size(), array(kept), array(keptStrides),
                         reduced.size(), array(reduced), array(reducedStrides),
                         outputs(), perOutput());
  }
};

template <typename Op>
LogicalResult emitReduceCuda(Op op, CudaKernelContext &context) {
  Shape in = shapeOf(op.getInput());
  uint32_t mask = op.getReducedMask();
  ReduceGroups groups(in, mask);
  if (!groups.fits())
    return context.error("a reduction over more than four separate groups "
                         "of axes is not supported");
  context.include(kCudaKernels);
  std::string shape =
                  "const ReduceShape shape = " + groups.initializer() + ";\n  ",
              type = context.elementType(op.getInput()),
              x = context.operand(op.getInput()), y = context.result();
  int64_t outputs = groups.outputs(), perOutput = groups.perOutput();
  if constexpr (std::is_same_v<Op, MaxGradOp>) {
    // One thread per output: count the ties, then share.
    context.launch(llvm::formatv("{0}maxGrad<{1}>(shape, {2}, {3}, {4}, {5});",
                                 shape, type, context.operand(op.getGrad()), x,
                                 context.operand(op.getMaximum()), y),
                   ceilDiv(outputs, kCudaThreads), kCudaThreads);
    return success();
  } else {
    const char *kind = cudaKind<Op>();
    // Outputs contiguous in the input (the innermost dimension kept):
    // with many rows, column tiles by chunks of rows, then the chunks in
    // order; with few, one thread per output reading along the
    // contiguous dimension. Otherwise one block per output.
    bool innerKept =
        !in.empty() && !((mask >> (in.size() - 1)) & 1) && in.back() != 1;
    if (int64_t chunks = op.getCudaColumnChunks()) {
      std::string partial =
          "f32(" + context.scratch(chunks * outputs * 4) + ")";
      context.launch(llvm::formatv("{0}reduceColumnsPartial<{1}, {2}>(shape, "
                                   "{3}, {4}, {5});",
                                   shape, kind, type, x, partial, chunks),
                     ceilDiv(outputs, 32), kCudaThreads, chunks);
      context.launch(llvm::formatv("{0}reduceColumnsFinish<{1}, {2}>(shape, "
                                   "{3}, {4}, {5});",
                                   shape, kind, type, partial, chunks, y),
                     ceilDiv(outputs, kCudaThreads), kCudaThreads);
    } else if (innerKept || perOutput < 64) {
      context.launch(
          llvm::formatv("{0}reduceThreadPerOutput<{1}, {2}>(shape, {3}, {4});",
                        shape, kind, type, x, y),
          ceilDiv(outputs, kCudaThreads), kCudaThreads);
    } else {
      context.launch(
          llvm::formatv("{0}reduceBlockPerOutput<{1}, {2}>(shape, {3}, {4});",
                        shape, kind, type, x, y),
          gridFor(outputs, 1), rowThreads(perOutput));
    }
    return success();
  }
}

template <typename Op> void attach(MLIRContext &context) {
  KernelFunctions<Op, emitReduceCpu<Op>, emitReduceCuda<Op>>::attach(context);
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerReductionsEmissionModels(MLIRContext &context) {
  attach<SumOp>(context);
  attach<MeanOp>(context);
  attach<MaxOp>(context);
  attach<MaxGradOp>(context);
}
