//===- LossesEmission.cpp - Losses in the CPU and CUDA code ---------------===//
//
// The code generation models of cross_entropy, its gradient, the fused
// linear_cross_entropy and its gradient, accuracy and mse: calls of the
// CPU kernels (LossesKernels.h), and on the GPU one block per row
// (LossesKernels.cuh), the loss and the accuracy then averaged over the
// counted rows' values in the op's scratch; the fused loss chunk by chunk
// (a host loop: cuBLASLt's product into the scratch, then one block per
// row, then the gradient's two products); mse as partial sums per block,
// then their sum in order.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"
#include "lang/ops/losses/LossesKernels.h"

#include "llvm/ADT/StringExtras.h"
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

constexpr const char *kCpuKernels = "lang/ops/losses/LossesKernels.h";
constexpr const char *kCudaKernels = "lang/ops/losses/LossesKernels.cuh";

/// The loss's attributes as the kernels' trailing arguments:
/// "ignoreIndex, smoothing" (accuracy: "ignoreIndex").
template <typename Op> std::string lossOptions(Op op) {
  std::string options = std::to_string(int64_t(op.getIgnoreIndex()));
  if constexpr (!std::is_same_v<Op, AccuracyOp>)
    options += ", " + doubleLiteral(op.getLabelSmoothing().convertToDouble());
  return options;
}

/// `kernel(operands..., rows, classes, options..., result)` on the CPU.
template <typename Op>
LogicalResult emitLossCpu(Op op, CpuKernelContext &context) {
  const char *kernel = std::is_same_v<Op, CrossEntropyOp> ? "crossEntropy"
                       : std::is_same_v<Op, AccuracyOp>   ? "accuracy"
                                                          : "crossEntropyGrad";
  auto [rows, classes] = rowsOf(op.getLogits());
  std::string arguments;
  for (Value v : op->getOperands())
    arguments += context.operand(v) + ", ";
  return context.call(kCpuKernels,
                      llvm::formatv("{0}({1}{2}, {3}, {4}, {5})", kernel,
                                    arguments, rows, classes, lossOptions(op),
                                    context.result()));
}

/// The fused classifier loss's sizes as the aggregate the kernels take.
std::string geometryLiteral(const losses::ClassifierGeometry &g) {
  return llvm::formatv("mnemo::losses::ClassifierGeometry{{{0}, {1}, {2}, {3}, "
                       "{4}, {5}}",
                       g.rows, g.dim, g.classes, g.chunkRows,
                       g.halfOperands ? "true" : "false",
                       g.bias ? "true" : "false")
      .str();
}

/// "ignoreIndex, smoothing" of the fused loss.
template <typename Op> std::string classifierLossOptions(Op op) {
  return llvm::formatv("{0}, {1}", int64_t(op.getIgnoreIndex()),
                       doubleLiteral(op.getLabelSmoothing().convertToDouble()))
      .str();
}

/// The pointer to an optional operand (the bias), or nullptr.
std::string optionalOperand(Value v, CpuKernelContext &context) {
  return v ? context.operand(v) : "nullptr";
}

/// "transposeWeight, ignoreIndex, smoothing", as the CPU kernels take them.
template <typename Op> std::string classifierOptions(Op op) {
  return std::string(op.getTransposeWeight() ? "true" : "false") + ", " +
         classifierLossOptions(op);
}

/// The fused loss's CPU kernels share one call: `kernel(operands..., bias,
/// geometry, transposeWeight, ignoreIndex, smoothing, results..., products,
/// workspace)`, "nullptr" for an absent bias or optional result; on 16-bit
/// operands `products` is the op's ClassifierProducts (oneDNN's bf16
/// products where the CPU has them), else "nullptr".
template <typename Op>
LogicalResult emitClassifierCpu(Op op, CpuKernelContext &context,
                                StringRef kernel, ValueRange operands,
                                ArrayRef<std::string> results) {
  std::vector<std::string> arguments = context.operands(operands);
  std::string bias = optionalOperand(op.getBias(), context),
              workspace = context.workspace(op.getCpuWorkspaceBytes());
  arguments.insert(arguments.end(), {bias, geometryLiteral(op.getGeometry()),
                                     classifierOptions(op)});
  arguments.insert(arguments.end(), results.begin(), results.end());
  context.include(kCpuKernels);
  losses::ClassifierGeometry g = op.getGeometry();
  bool bf16 = llvm::cast<ShapedType>(op.getHidden().getType())
                  .getElementType()
                  .isBF16();
  arguments.push_back(
      g.halfOperands
          ? "&" + context.fileScopeObject(
                      "ClassifierProducts",
                      geometryLiteral(g) + ", " +
                          (op.getTransposeWeight() ? "true" : "false") +
                          (bf16 ? ", MatmulData::BF16" : ", MatmulData::F16"))
          : "nullptr");
  arguments.push_back(workspace);
  context.out() << "  " << kernel << "(" << llvm::join(arguments, ", ")
                << ");\n";
  return success();
}

/// An optional result's pointer, or nullptr.
std::string optionalResult(bool present, unsigned i,
                           CpuKernelContext &context) {
  return present ? context.result(i) : "nullptr";
}

LogicalResult emitLinearCrossEntropyCpu(LinearCrossEntropyOp op,
                                        CpuKernelContext &context) {
  return emitClassifierCpu(
      op, context, "linearCrossEntropy",
      {op.getHidden(), op.getWeight(), op.getTargets()},
      {context.result(0), context.result(1),
       optionalResult(bool(op.getAccuracy()), 2, context)});
}

LogicalResult emitLinearCrossEntropyGradCpu(LinearCrossEntropyGradOp op,
                                            CpuKernelContext &context) {
  return emitClassifierCpu(op, context, "linearCrossEntropyGrad",
                           {op.getGrad(), op.getHidden(), op.getWeight(),
                            op.getTargets(), op.getLogSumExp()},
                           {context.result(0), context.result(1),
                            optionalResult(bool(op.getBias()), 2, context)});
}

LogicalResult emitLinearCrossEntropyWithGradCpu(LinearCrossEntropyWithGradOp op,
                                                CpuKernelContext &context) {
  return emitClassifierCpu(
      op, context, "linearCrossEntropyWithGrad",
      {op.getGrad(), op.getHidden(), op.getWeight(), op.getTargets()},
      {context.result(0), context.result(1), context.result(2),
       optionalResult(bool(op.getBias()), 3, context)});
}

/// cuBLASLt's name of a storage type (runtime/cuda/CudaModel.h DType).
StringRef gemmType(CudaKernelContext &context, Value v) {
  std::string t = context.elementType(v);
  return t == "float" ? "F32" : t == "bf16_t" ? "BF16" : "F16";
}

/// accuracy's threads for a row of n: a power of two, for the block's tree
/// of comparisons.
int treeThreads(int64_t n) {
  int threads = 32;
  while (threads < 1024 && threads < n)
    threads *= 2;
  return threads;
}

/// Emits `body(rows, index)` for each chunk: a host loop over the whole
/// chunks (its variable the kernels' r.index), then the partial last one.
void forEachChunk(CudaKernelContext &context,
                  const losses::ClassifierGeometry &g,
                  llvm::function_ref<void(int64_t, const std::string &)> body) {
  int64_t R = std::min(g.chunkRows, g.rows), whole = g.rows / R,
          rest = g.rows - whole * R;
  if (whole == 1) {
    body(R, "0");
  } else if (whole > 1) {
    context.hostCode(llvm::formatv("for (int64_t chunk = 0; chunk < {0}; "
                                   "++chunk) {{",
                                   whole));
    body(R, "chunk");
    context.hostCode("}");
  }
  if (rest)
    body(rest, std::to_string(whole));
}

/// The device pointer to an optional operand (the bias), or a null `const
/// T *`.
std::string optionalOperand(Value v, StringRef T, CudaKernelContext &context) {
  return v ? context.operand(v)
           : llvm::formatv("static_cast<const {0} *>(nullptr)", T).str();
}

/// The chunk's logits [rows, classes] = h[chunk] @ W^T (or @ W) into the
/// scratch's bottom.
CudaGemm chunkLogits(CudaKernelContext &context, Value hidden, Value weight,
                     const losses::ClassifierGeometry &g, bool transposeWeight,
                     int64_t rows, const std::string &index, int64_t held) {
  int64_t es = g.halfOperands ? 2 : 4, R = std::min(g.chunkRows, g.rows);
  CudaGemm gemm;
  gemm.a = hidden;
  gemm.b = weight;
  gemm.c = hidden; // names the element type; cAt is the scratch
  gemm.aAt = llvm::formatv("{0} + {1} * {2}", context.hostOperand(hidden),
                           index, R * g.dim * es);
  gemm.cAt = context.hostScratch(held);
  gemm.transposeB = transposeWeight;
  gemm.m = rows;
  gemm.n = gemm.ldc = g.classes;
  gemm.k = gemm.lda = g.dim;
  gemm.ldb = transposeWeight ? g.dim : g.classes;
  gemm.type = gemmType(context, hidden);
  gemm.reservedWorkspace = held;
  return gemm;
}

LogicalResult emitLinearCrossEntropyCuda(LinearCrossEntropyOp op,
                                         CudaKernelContext &context) {
  losses::ClassifierGeometry g = op.getGeometry();
  losses::ClassifierCudaScratch layout =
      losses::classifierCudaScratch(g, op.getCudaPass());
  std::string base = context.scratch(op.getCudaScratchBytes());
  std::string T = context.elementType(op.getHidden());
  std::string rowLoss = llvm::formatv("f32({0} + {1})", base, layout.rowLoss),
              counted = llvm::formatv("f32({0} + {1})", base, layout.counted),
              hits = llvm::formatv("f32({0} + {1})", base, layout.hits);
  context.include(kCudaKernels);
  forEachChunk(context, g, [&](int64_t rows, const std::string &index) {
    context.gemm(chunkLogits(context, op.getHidden(), op.getWeight(), g,
                             op.getTransposeWeight(), rows, index,
                             layout.held));
    context.launchIndexed(
        llvm::formatv("classifierRows<{0}>(r, reinterpret_cast<{0} *>({1}), "
                      "{2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10});",
                      T, base, optionalOperand(op.getBias(), T, context),
                      context.operand(op.getTargets()), g.chunkRows, rows,
                      g.classes, classifierLossOptions(op), rowLoss, counted,
                      context.result(1)),
        gridFor(rows, 1), rowThreads(g.classes), index);
    if (op.getAccuracy())
      context.launchIndexed(
          llvm::formatv("classifierHits<{0}>(r, reinterpret_cast<const {0} "
                        "*>({1}), {2}, {3}, {4}, {5}, {6}, {7}, {8});",
                        T, base, context.operand(op.getTargets()), g.chunkRows,
                        rows, g.classes, int64_t(op.getIgnoreIndex()), hits,
                        counted),
          gridFor(rows, 1), treeThreads(g.classes), index);
  });
  context.launch(llvm::formatv("countedMeanOf({0}, {1}, {2}, {3});", rowLoss,
                               counted, g.rows, context.result(0)),
                 1, 1024);
  if (op.getAccuracy())
    context.launch(llvm::formatv("countedMeanOf({0}, {1}, {2}, {3});", hits,
                                 counted, g.rows, context.result(2)),
                   1, 1024);
  return success();
}

/// What the backward of the fused classifier loss reads and writes: the
/// loss's gradient, the forward's operands, and the gradients (results
/// `firstGrad` on, the bias's last).
struct ClassifierBackward {
  Value grad, hidden, weight, targets, bias, hiddenGrad, weightGrad, biasGrad;
  unsigned firstGrad = 0;
  bool transposeWeight = false;
  std::string lossOptions; // "ignoreIndex, smoothing"
  int64_t ignoreIndex = 0;
};

template <typename Op>
ClassifierBackward classifierBackward(Op op, unsigned firstGrad) {
  return {op.getGrad(),
          op.getHidden(),
          op.getWeight(),
          op.getTargets(),
          op.getBias(),
          op.getHiddenGrad(),
          op.getWeightGrad(),
          op.getBiasGrad(),
          firstGrad,
          op.getTransposeWeight(),
          classifierLossOptions(op),
          int64_t(op.getIgnoreIndex())};
}

/// The backward's launches: the rows that take part counted, and per chunk
/// its logits (cuBLASLt), `chunkRowKernels` (which turn them into their
/// gradient), the bias's column sums and the two gradient products; the
/// 16-bit sums narrowed at the end.
void emitClassifierBackwardCuda(
    const ClassifierBackward &op, const losses::ClassifierGeometry &g,
    const losses::ClassifierCudaScratch &layout, int64_t scratchBytes,
    CudaKernelContext &context,
    llvm::function_ref<void(int64_t, const std::string &)> chunkRowKernels) {
  std::string base = context.scratch(scratchBytes);
  std::string T = context.elementType(op.hidden);
  std::string scratchHost = context.hostScratch(scratchBytes);
  int64_t es = g.halfOperands ? 2 : 4, R = std::min(g.chunkRows, g.rows);
  bool tw = op.transposeWeight;
  context.include(kCudaKernels);
  context.launch(llvm::formatv("countRows({0}, {1}, {2}, f32({3} + {4}));",
                               context.operand(op.targets), g.rows,
                               op.ignoreIndex, base, layout.total),
                 1, 1024);
  // The weight's gradient sums the chunks' products (beta 1): in f32 in
  // the scratch for 16-bit operands, else in place.
  std::string weightSums =
      g.halfOperands
          ? llvm::formatv("{0} + {1}", scratchHost, layout.weightSums).str()
          : context.hostOperand(op.weightGrad);
  context.hostCode(
      llvm::formatv("L.zero({0}, {1});", weightSums, g.classes * g.dim * 4));
  // The bias's gradient sums the chunks' column sums, likewise.
  std::string biasSums, biasSumsHost;
  if (g.bias) {
    biasSums =
        g.halfOperands
            ? llvm::formatv("f32({0} + {1})", base, layout.biasSums).str()
            : context.result(op.firstGrad + 2);
    biasSumsHost =
        g.halfOperands
            ? llvm::formatv("{0} + {1}", scratchHost, layout.biasSums).str()
            : context.hostOperand(op.biasGrad);
    context.hostCode(
        llvm::formatv("L.zero({0}, {1});", biasSumsHost, g.classes * 4));
  }
  forEachChunk(context, g, [&](int64_t rows, const std::string &index) {
    context.gemm(chunkLogits(context, op.hidden, op.weight, g, tw, rows, index,
                             layout.held));
    chunkRowKernels(rows, index);
    if (g.bias)
      context.launch(
          llvm::formatv(
              "addColumnSums<{0}>(reinterpret_cast<const {0} *>({1}), "
              "{2}, {3}, {4});",
              T, base, rows, g.classes, biasSums),
          gridFor(g.classes), kCudaThreads);
    std::string chunkHidden =
        llvm::formatv("{0} + {1} * {2}", context.hostOperand(op.hidden), index,
                      R * g.dim * es);
    // The hidden states' gradient for the chunk's rows: G W (or G W^T).
    CudaGemm dh;
    dh.a = dh.b = dh.c = op.hidden;
    dh.aAt = scratchHost;
    dh.bAt = context.hostOperand(op.weight);
    dh.cAt =
        llvm::formatv("{0} + {1} * {2}", context.hostOperand(op.hiddenGrad),
                      index, R * g.dim * es);
    dh.transposeB = !tw;
    dh.m = rows;
    dh.n = dh.ldc = g.dim;
    dh.k = dh.lda = g.classes;
    dh.ldb = tw ? g.dim : g.classes;
    dh.type = gemmType(context, op.hidden);
    dh.reservedWorkspace = layout.held;
    context.gemm(dh);
    // The weight's: += G^T h (weight [C, D]) or h^T G (weight [D, C]).
    CudaGemm dw;
    dw.a = dw.b = dw.c = op.hidden;
    dw.aAt = tw ? scratchHost : chunkHidden;
    dw.bAt = tw ? chunkHidden : scratchHost;
    dw.cAt = weightSums;
    dw.transposeA = true;
    dw.m = tw ? g.classes : g.dim;
    dw.n = dw.ldc = tw ? g.dim : g.classes;
    dw.k = rows;
    dw.lda = tw ? g.classes : g.dim;
    dw.ldb = tw ? g.dim : g.classes;
    dw.type = gemmType(context, op.hidden);
    dw.accumulate = true;
    dw.outputF32 = g.halfOperands;
    dw.reservedWorkspace = layout.held;
    context.gemm(dw);
  });
  if (g.halfOperands)
    context.launch(llvm::formatv("narrowSums<{0}>(f32({1} + {2}), {3}, {4});",
                                 T, base, layout.weightSums, g.classes * g.dim,
                                 context.result(op.firstGrad + 1)),
                   gridFor(g.classes * g.dim), kCudaThreads);
  if (g.halfOperands && g.bias)
    context.launch(llvm::formatv("narrowSums<{0}>({1}, {2}, {3});", T, biasSums,
                                 g.classes, context.result(op.firstGrad + 2)),
                   gridFor(g.classes), kCudaThreads);
}

LogicalResult emitLinearCrossEntropyGradCuda(LinearCrossEntropyGradOp op,
                                             CudaKernelContext &context) {
  losses::ClassifierGeometry g = op.getGeometry();
  losses::ClassifierCudaScratch layout =
      losses::classifierCudaScratch(g, losses::ClassifierPass::Backward);
  int64_t bytes = op.getCudaScratchBytes();
  std::string base = context.scratch(bytes);
  std::string T = context.elementType(op.getHidden());
  emitClassifierBackwardCuda(
      classifierBackward(op, 0), g, layout, bytes, context,
      [&](int64_t rows, const std::string &index) {
        context.launchIndexed(
            llvm::formatv(
                "classifierGradRows<{0}>(r, {1}, reinterpret_cast<{0} "
                "*>({2}), {3}, {4}, {5}, {6}, {7}, {8}, {9}, f32({2} + {10}));",
                T, context.operand(op.getGrad()), base,
                optionalOperand(op.getBias(), T, context),
                context.operand(op.getTargets()),
                context.operand(op.getLogSumExp()), g.chunkRows, rows,
                g.classes, classifierLossOptions(op), layout.total),
            gridFor(rows, 1), rowThreads(g.classes), index);
      });
  return success();
}

/// One pass: per chunk, classifierRows adds the bias to the logits and
/// writes each row's loss, count and log-sum-exp (to the scratch), and
/// classifierGradRows turns the logits (the bias already in them) into
/// their gradient; the loss is the rows' mean at the end, as the forward's.
LogicalResult
emitLinearCrossEntropyWithGradCuda(LinearCrossEntropyWithGradOp op,
                                   CudaKernelContext &context) {
  losses::ClassifierGeometry g = op.getGeometry();
  losses::ClassifierCudaScratch layout = losses::classifierCudaScratch(
      g, losses::ClassifierPass::ForwardAndBackward);
  int64_t bytes = op.getCudaScratchBytes();
  std::string base = context.scratch(bytes);
  std::string T = context.elementType(op.getHidden());
  auto at = [&](int64_t offset) {
    return llvm::formatv("f32({0} + {1})", base, offset).str();
  };
  emitClassifierBackwardCuda(
      classifierBackward(op, 1), g, layout, bytes, context,
      [&](int64_t rows, const std::string &index) {
        context.launchIndexed(
            llvm::formatv(
                "classifierRows<{0}>(r, reinterpret_cast<{0} *>({1}), {2}, "
                "{3}, {4}, {5}, {6}, {7}, {8}, {9}, {10});",
                T, base, optionalOperand(op.getBias(), T, context),
                context.operand(op.getTargets()), g.chunkRows, rows, g.classes,
                classifierLossOptions(op), at(layout.rowLoss),
                at(layout.counted), at(layout.logSumExp)),
            gridFor(rows, 1), rowThreads(g.classes), index);
        context.launchIndexed(
            llvm::formatv(
                "classifierGradRows<{0}>(r, {1}, reinterpret_cast<{0} "
                "*>({2}), static_cast<const {0} *>(nullptr), {3}, {4}, {5}, "
                "{6}, {7}, {8}, {9});",
                T, context.operand(op.getGrad()), base,
                context.operand(op.getTargets()), at(layout.logSumExp),
                g.chunkRows, rows, g.classes, classifierLossOptions(op),
                at(layout.total)),
            gridFor(rows, 1), rowThreads(g.classes), index);
      });
  context.launch(llvm::formatv("countedMeanOf({0}, {1}, {2}, {3});",
                               at(layout.rowLoss), at(layout.counted), g.rows,
                               context.result(0)),
                 1, 1024);
  return success();
}

/// cross_entropy and accuracy: one block per row writes the row's value
/// (its loss, its hit) and whether it counts (its target is not
/// ignore_index) into the op's scratch, then countedMeanOf divides the
/// values' sum by the count, each summed in a fixed order.
template <typename Op>
LogicalResult emitRowMeanCuda(Op op, CudaKernelContext &context) {
  auto [rows, classes] = rowsOf(op.getLogits());
  constexpr bool loss = std::is_same_v<Op, CrossEntropyOp>;
  int threads = loss ? rowThreads(classes) : treeThreads(classes);
  std::string scratch = "f32(" + context.scratch(2 * rows * 4) + ")";
  context.include(kCudaKernels);
  context.launch(
      llvm::formatv("{0}<{1}>({2}{3}, {4}, {5}, {6}, {7}, {8}, {8} + {5});",
                    loss ? "crossEntropyRows" : "accuracyRows",
                    context.elementType(op.getLogits()), loss ? "r, " : "",
                    context.operand(op.getLogits()),
                    context.operand(op.getTargets()), rows, classes,
                    lossOptions(op), scratch),
      gridFor(rows, 1), threads);
  context.launch(llvm::formatv("countedMeanOf({0}, {0} + {1}, {1}, {2});",
                               scratch, rows, context.result()),
                 1, 1024);
  return success();
}

LogicalResult emitCrossEntropyGradCuda(CrossEntropyGradOp op,
                                       CudaKernelContext &context) {
  auto [rows, classes] = rowsOf(op.getLogits());
  std::string counted = "f32(" + context.scratch(4) + ")";
  context.include(kCudaKernels);
  // The rows that take part, counted once, then the gradient by rows.
  context.launch(llvm::formatv("countRows({0}, {1}, {2}, {3});",
                               context.operand(op.getTargets()), rows,
                               int64_t(op.getIgnoreIndex()), counted),
                 1, 1024);
  context.launch(
      llvm::formatv(
          "crossEntropyGrad<{0}>(r, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8});",
          context.elementType(op.getLogits()), context.operand(op.getGrad()),
          context.operand(op.getLogits()), context.operand(op.getTargets()),
          rows, classes, lossOptions(op), counted, context.result()),
      gridFor(rows, 1), rowThreads(classes));
  return success();
}

LogicalResult emitMseCpu(MseOp op, CpuKernelContext &context) {
  std::string a = context.operand(op.getLhs()),
              b = context.operand(op.getRhs());
  return context.call(kCpuKernels,
                      llvm::formatv("mse({0}, {1}, {2}, {3})", a, b,
                                    product(shapeOf(op.getLhs())),
                                    context.result()));
}

LogicalResult emitMseCuda(MseOp op, CudaKernelContext &context) {
  int64_t n = product(shapeOf(op.getLhs())), blocks = op.getCudaBlocks();
  std::string partial = "f32(" + context.scratch(blocks * 4) + ")";
  context.include(kCudaKernels);
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

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerLossesEmissionModels(MLIRContext &context) {
  KernelFunctions<MseOp, emitMseCpu, emitMseCuda>::attach(context);
  KernelFunctions<CrossEntropyOp, emitLossCpu<CrossEntropyOp>,
                  emitRowMeanCuda<CrossEntropyOp>>::attach(context);
  KernelFunctions<CrossEntropyGradOp, emitLossCpu<CrossEntropyGradOp>,
                  emitCrossEntropyGradCuda>::attach(context);
  KernelFunctions<AccuracyOp, emitLossCpu<AccuracyOp>,
                  emitRowMeanCuda<AccuracyOp>>::attach(context);
  KernelFunctions<LinearCrossEntropyOp, emitLinearCrossEntropyCpu,
                  emitLinearCrossEntropyCuda>::attach(context);
  KernelFunctions<LinearCrossEntropyGradOp, emitLinearCrossEntropyGradCpu,
                  emitLinearCrossEntropyGradCuda>::attach(context);
  KernelFunctions<LinearCrossEntropyWithGradOp,
                  emitLinearCrossEntropyWithGradCpu,
                  emitLinearCrossEntropyWithGradCuda>::attach(context);
}
