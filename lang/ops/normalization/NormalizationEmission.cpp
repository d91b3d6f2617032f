//===- NormalizationEmission.cpp - Normalization in the CPU and CUDA code -===//
//
// The code generation models of layernorm, rmsnorm, batch_norm and their
// backward ops: calls of the CPU kernels (NormalizationKernels.h), and on
// the GPU one block per row (per channel for batch_norm; batch_norm_apply
// is a grid-stride loop over the elements), then (for the
// backward ops) the scale and bias gradients as column sums over row chunks in
// the op's scratch (NormalizationKernels.cuh).
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"
#include "lang/OpVerification.h"
#include "lang/PlanAttributes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <type_traits>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

constexpr const char *kCpuKernels =
    "lang/ops/normalization/NormalizationKernels.h";
constexpr const char *kCudaKernels =
    "lang/ops/normalization/NormalizationKernels.cuh";

/// The operands the four ops share, by their roles.
struct Normalization {
  Value grad, input, scale, bias; // grad: backward ops; bias: layernorm
  double eps;
  bool rms, backward;
  /// Backward ops: row chunks of the CUDA parameter-gradient sums.
  int64_t gradChunks = 0;
};

Normalization describe(LayerNormOp op) {
  return {{},
          op.getInput(),
          op.getScale(),
          op.getBias(),
          op.getEpsilon().convertToDouble(),
          /*rms=*/false,
          /*backward=*/false};
}
Normalization describe(RmsNormOp op) {
  return {{},
          op.getInput(),
          op.getScale(),
          {},
          op.getEpsilon().convertToDouble(),
          /*rms=*/true,
          /*backward=*/false};
}
template <typename GradOp> Normalization describeGrad(GradOp op) {
  return {op.getGrad(),
          op.getInput(),
          op.getScale(),
          {},
          op.getEpsilon().convertToDouble(),
          /*rms=*/std::is_same_v<GradOp, RmsNormGradOp>,
          /*backward=*/true,
          op.getCudaGradChunks()};
}
Normalization describe(LayerNormGradOp op) { return describeGrad(op); }
Normalization describe(RmsNormGradOp op) { return describeGrad(op); }

template <typename Op>
LogicalResult emitNormalizationCpu(Op opOp, CpuKernelContext &context) {
  Operation *op = opOp;
  Normalization n = describe(llvm::cast<Op>(op));
  auto [rows, d] = verification::rowsAndDepth(n.input);
  std::string input = context.operand(n.input),
              scale = context.operand(n.scale),
              bias = n.bias ? context.operand(n.bias) : "nullptr",
              grad = n.grad ? context.operand(n.grad) : "";
  context.include(kCpuKernels);
  std::string eps = floatLiteral(n.eps), rms = n.rms ? "true" : "false";
  if (!n.backward)
    context.out() << llvm::formatv(
        "  layerNorm({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7});\n", input, scale,
        bias, context.result(), rows, d, eps, rms);
  else
    context.out() << llvm::formatv(
        "  layerNormGrad({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, "
        "{9});\n",
        grad, input, scale, context.result(0), context.result(1),
        n.rms ? "nullptr" : context.result(2), rows, d, eps, rms);
  return success();
}

template <typename Op>
LogicalResult emitNormalizationCuda(Op opOp, CudaKernelContext &context) {
  Operation *op = opOp;
  Normalization n = describe(llvm::cast<Op>(op));
  auto [rows, d] = verification::rowsAndDepth(n.input);
  std::string type = context.elementType(n.input);
  std::string eps = floatLiteral(n.eps), rms = n.rms ? "true" : "false";
  context.include(kCudaKernels);
  if (!n.backward) {
    context.launch(
        llvm::formatv("layerNorm<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, "
                      "{8});",
                      type, context.operand(n.input), context.operand(n.scale),
                      n.bias ? context.operand(n.bias) : "nullptr",
                      context.result(), rows, d, eps, rms),
        gridFor(rows, 1), rowThreads(d));
    return success();
  }
  // The rows' statistics (2 floats a row), then [chunks][2][d] partial
  // column sums: what the op declares (NormalizationOps.cpp).
  int64_t chunks = n.gradChunks;
  int64_t statsBytes = (rows * 8 + 255) / 256 * 256;
  std::string base = context.scratch(
      llvm::cast<CudaScratchOpInterface>(op).getCudaScratchBytes());
  std::string stats = "f32(" + base + ")",
              partial = llvm::formatv("f32({0} + {1})", base, statsBytes).str();
  std::string grad = context.operand(n.grad), input = context.operand(n.input);
  context.launch(
      llvm::formatv("layerNormGradRows<{0}>({1}, {2}, {3}, {4}, {5}, {6}, "
                    "{7}, {8}, {9});",
                    type, grad, input, context.operand(n.scale),
                    context.result(0), stats, rows, d, eps, rms),
      gridFor(rows, 1), rowThreads(d));
  context.launch(
      llvm::formatv("layerNormGradColumns<{0}>({1}, {2}, {3}, {4}, {5}, {6});",
                    type, grad, input, stats, partial, rows, d),
      ceilDiv(d, kCudaThreads), kCudaThreads, chunks);
  context.launch(
      llvm::formatv("layerNormGradFinish<{0}>({1}, {2}, {3}, {4}, {5});", type,
                    partial, chunks, d, context.result(1),
                    n.rms ? "(" + type + " *)nullptr" : context.result(2)),
      ceilDiv(d, kCudaThreads), kCudaThreads);
  return success();
}

/// batch_norm and batch_norm_grad see their input as [n, c, inner].
struct ChannelLayout {
  int64_t n, c, inner;
};
ChannelLayout channelLayout(Value input) {
  auto type = verification::tensorType(input);
  int64_t n = type.getDimSize(0), c = type.getDimSize(1);
  return {n, c, type.getNumElements() / (n * c)};
}

/// The layout batch norm's kernels index (the input, its output and their
/// gradients share it, passes/ChannelLayout.cpp): the run's channel block
/// where the plan keeps the input channel-blocked, else 1 (NCHW).
std::string channelBlock(Value input, CpuKernelContext &context) {
  if (!plan::isChannelBlocked(input))
    return "1";
  context.include("lang/ops/convolution/ConvolutionKernels.h");
  return "channelBlock()";
}

/// The kernel of a batch_norm, batch_norm_apply or batch_norm_grad: its
/// mnemonic in camel case (batchNormApply). Every one takes the op's
/// operands, then its results, then the [n, c, inner] layout and epsilon.
template <typename Op> std::string batchNormKernel() {
  return llvm::convertToCamelFromSnakeCase(
      Op::getOperationName().drop_front(Op::getOperationName().find('.') + 1));
}

/// The kernel's arguments after the operands and results: the layout and
/// epsilon.
template <typename Op>
std::vector<std::string> layoutAndEpsilon(Op op, const ChannelLayout &l) {
  return {std::to_string(l.n), std::to_string(l.c), std::to_string(l.inner),
          floatLiteral(op.getEpsilon().convertToDouble())};
}

/// The CPU call, with the channel block of the input's layout last.
template <typename Op>
LogicalResult emitBatchNormCpu(Op op, CpuKernelContext &context) {
  std::vector<std::string> args = context.operands(op->getOperands());
  context.include(kCpuKernels);
  for (unsigned r = 0; r < op->getNumResults(); ++r)
    args.push_back(context.result(r));
  llvm::append_range(args, layoutAndEpsilon(op, channelLayout(op.getInput())));
  args.push_back(channelBlock(op.getInput(), context));
  context.out() << "  " << batchNormKernel<Op>() << "("
                << llvm::join(args, ", ") << ");\n";
  return success();
}

/// The CUDA launch: one block per channel (the statistics' and the
/// gradients' sums), or for batch_norm_apply a grid-stride loop over the
/// elements.
template <typename Op>
LogicalResult emitBatchNormCuda(Op op, CudaKernelContext &context) {
  context.include(kCudaKernels);
  ChannelLayout l = channelLayout(op.getInput());
  std::vector<std::string> args = context.operands(op->getOperands());
  for (unsigned r = 0; r < op->getNumResults(); ++r)
    args.push_back(context.result(r));
  llvm::append_range(args, layoutAndEpsilon(op, l));
  // The data's type, then the scale's (f32 beside 16-bit data under mixed
  // precision).
  std::string call =
      llvm::formatv("{0}<{1}, {2}>({3});", batchNormKernel<Op>(),
                    context.elementType(op.getInput()),
                    context.elementType(op.getScale()), llvm::join(args, ", "));
  if constexpr (std::is_same_v<Op, BatchNormApplyOp>)
    context.launch(call, gridFor(l.n * l.c * l.inner), kCudaThreads);
  else
    context.launch(call, gridFor(l.c, 1), rowThreads(l.n * l.inner));
  return success();
}

template <typename Op> void attach(MLIRContext &context) {
  KernelFunctions<Op, emitNormalizationCpu<Op>,
                  emitNormalizationCuda<Op>>::attach(context);
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerNormalizationEmissionModels(MLIRContext &context) {
  attach<LayerNormOp>(context);
  attach<RmsNormOp>(context);
  attach<LayerNormGradOp>(context);
  attach<RmsNormGradOp>(context);
  KernelFunctions<BatchNormOp, emitBatchNormCpu<BatchNormOp>,
                  emitBatchNormCuda<BatchNormOp>>::attach(context);
  KernelFunctions<BatchNormApplyOp, emitBatchNormCpu<BatchNormApplyOp>,
                  emitBatchNormCuda<BatchNormApplyOp>>::attach(context);
  KernelFunctions<BatchNormGradOp, emitBatchNormCpu<BatchNormGradOp>,
                  emitBatchNormCuda<BatchNormGradOp>>::attach(context);
}
