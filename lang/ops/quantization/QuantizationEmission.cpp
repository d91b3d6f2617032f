//===- QuantizationEmission.cpp - Quantization in the CPU and CUDA code ---===//
//
// The code generation models of the quantization family: calls of the CPU
// kernels (QuantizationKernels.h), and on the GPU the device functions of
// QuantizationKernels.cuh (a block per channel for the observers, a grid
// over the elements for fake quantization and dequantization, a block per
// row for the activations' quantization, a block per output channel for
// the CSR product) and cuBLASLt's int8 GEMM. 2:4-sparse weights need
// cuSPARSELt, which the CUDA toolkit lacks: the GPU refuses them.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"
#include "lang/OpVerification.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <type_traits>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

constexpr const char *kCpuKernels =
    "lang/ops/quantization/QuantizationKernels.h";
constexpr const char *kCudaKernels =
    "lang/ops/quantization/QuantizationKernels.cuh";

/// A tensor read per channel along `axis` (-1: one channel): the number
/// of channels and of elements after the axis.
std::pair<int64_t, int64_t> channelsOf(Value tensor, int64_t axis) {
  auto type = llvm::cast<ShapedType>(tensor.getType());
  if (axis < 0)
    return {1, type.getNumElements()};
  return {type.getDimSize(axis), product(type.getShape().drop_front(axis + 1))};
}

/// observe_minmax's call, the same on both backends but for how the step
/// is passed (a value on the CPU, a device pointer on the GPU).
std::string observeCall(ObserveMinMaxOp o, ArrayRef<std::string> operands,
                        StringRef step, StringRef lo, StringRef hi) {
  auto [channels, inner] = channelsOf(o.getInput(), o.getAxis());
  return llvm::formatv(
      "observeMinMax({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9});",
      product(shapeOf(o.getInput())), channels, inner, operands[0], operands[1],
      operands[2], lo, hi, step,
      doubleLiteral(o.getAveragingConstant().convertToDouble()));
}

/// fakeQuantize's call for fake_quant (no gradient) and fake_quant_grad:
/// operands input, min, max and (the gradient) grad.
template <typename Op>
std::string fakeQuantCall(Op f, ArrayRef<std::string> operands,
                          StringRef result) {
  auto [channels, inner] = channelsOf(f.getInput(), f.getAxis());
  return llvm::formatv(
      "fakeQuantize({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10});",
      product(shapeOf(f.getInput())), channels, inner, operands[0],
      operands.size() > 3 ? operands[3] : "nullptr", operands[1], operands[2],
      int64_t(f.getQuantMin()), int64_t(f.getQuantMax()),
      f.getSymmetric() ? "true" : "false", result);
}

template <typename Op> SmallVector<Value> fakeQuantOperands(Op f) {
  SmallVector<Value> operands = {f.getInput(), f.getMin(), f.getMax()};
  if constexpr (std::is_same_v<Op, FakeQuantGradOp>)
    operands.push_back(f.getGrad());
  return operands;
}

//===----------------------------------------------------------------------===//
// CPU
//===----------------------------------------------------------------------===//

LogicalResult emitObserveMinMaxCpu(ObserveMinMaxOp o,
                                   CpuKernelContext &context) {
  auto operands =
      context.operands({o.getInput(), o.getMin(), o.getMax(), o.getStep()});
  context.include(kCpuKernels);
  context.out() << "  "
                << observeCall(o, operands, "*" + operands[3],
                               context.result(0), context.result(1))
                << "\n";
  return success();
}

template <typename Op>
LogicalResult emitFakeQuantCpu(Op f, CpuKernelContext &context) {
  auto operands = context.operands(fakeQuantOperands(f));
  context.include(kCpuKernels);
  context.out() << "  " << fakeQuantCall(f, operands, context.result()) << "\n";
  return success();
}

LogicalResult emitQuantizeRowsCpu(QuantizeRowsOp q, CpuKernelContext &context) {
  std::string input = context.operand(q.getInput());
  auto [rows, k] = verification::rowsAndDepth(q.getInput());
  return context.call(
      kCpuKernels, llvm::formatv("quantizeRows({0}, {1}, {2}, {3}, {4}, {5})",
                                 rows, k, input, context.result(0),
                                 context.result(1), context.result(2)));
}

LogicalResult emitMatmulInt8Cpu(MatmulInt8Op m, CpuKernelContext &context) {
  auto operands = context.operands(m->getOperands());
  auto [rows, k] = verification::rowsAndDepth(m.getLhs());
  return context.call(
      kCpuKernels, llvm::formatv("matmulInt8({0}, {1}, {2}, {3}, {4})", rows,
                                 shapeOf(m.getRhs())[0], k,
                                 llvm::join(operands, ", "), context.result()));
}

LogicalResult emitDequantizeCpu(DequantizeOp d, CpuKernelContext &context) {
  auto operands = context.operands(d->getOperands());
  return context.call(
      kCpuKernels,
      llvm::formatv("dequantize({0}, {1}, {2}, {3}, {4})",
                    product(shapeOf(d.getResult())), shapeOf(d.getScale())[0],
                    d.getBits(), llvm::join(operands, ", "), context.result()));
}

/// The sparse products' CPU calls: a tile of output channels at a time
/// decompressed into the workspace the op declares, then sgemm.
std::string sparseWorkspace(Operation *op, CpuKernelContext &context) {
  return context.workspace(
      llvm::cast<CpuWorkspaceOpInterface>(op).getCpuWorkspaceBytes());
}

/// matmul_csr's columns, i16 or i32, as the kernels' two pointers.
std::pair<std::string, std::string> csrColumns(MatmulCsrOp m,
                                               const std::string &columns) {
  bool narrow = ctypeOf(m.getColumns().getType()).bytes == 2;
  return {narrow ? columns : "nullptr", narrow ? "nullptr" : columns};
}

LogicalResult emitMatmulSparse24Cpu(MatmulSparse24Op m,
                                    CpuKernelContext &context) {
  auto operands = context.operands(m->getOperands());
  std::string scratch = sparseWorkspace(m, context);
  auto [rows, k] = verification::rowsAndDepth(m.getLhs());
  return context.call(
      kCpuKernels,
      llvm::formatv("matmulSparse24({0}, {1}, {2}, {3}, {4}, {5})", rows,
                    shapeOf(m.getValues())[0], k, llvm::join(operands, ", "),
                    scratch, context.result()));
}

LogicalResult emitMatmulCsrCpu(MatmulCsrOp m, CpuKernelContext &context) {
  auto operands = context.operands(m->getOperands());
  std::string scratch = sparseWorkspace(m, context);
  auto [rows, k] = verification::rowsAndDepth(m.getLhs());
  auto [narrow, wide] = csrColumns(m, operands[2]);
  return context.call(
      kCpuKernels,
      llvm::formatv(
          "matmulCsr({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
          "{10})",
          rows, shapeOf(m.getRowOffsets())[0] - 1, k, shapeOf(m.getValues())[0],
          operands[0], operands[1], narrow, wide, operands[3], scratch,
          context.result()));
}

//===----------------------------------------------------------------------===//
// CUDA
//===----------------------------------------------------------------------===//

LogicalResult emitObserveMinMaxCuda(ObserveMinMaxOp o,
                                    CudaKernelContext &context) {
  std::vector<std::string> operands =
      context.operands({o.getInput(), o.getMin(), o.getMax(), o.getStep()});
  context.include(kCudaKernels);
  // A block per channel.
  context.launch(observeCall(o, operands, operands[3], context.result(0),
                             context.result(1)),
                 channelsOf(o.getInput(), o.getAxis()).first, kCudaThreads);
  return success();
}

template <typename Op>
LogicalResult emitFakeQuantCuda(Op f, CudaKernelContext &context) {
  context.include(kCudaKernels);
  context.launch(fakeQuantCall(f, context.operands(fakeQuantOperands(f)),
                               context.result()),
                 gridFor(product(shapeOf(f.getInput()))), kCudaThreads);
  return success();
}

LogicalResult emitQuantizeRowsCuda(QuantizeRowsOp q,
                                   CudaKernelContext &context) {
  auto [rows, k] = verification::rowsAndDepth(q.getInput());
  context.include(kCudaKernels);
  // A block per row.
  context.launch(llvm::formatv("quantizeRows({0}, {1}, {2}, {3}, {4});", k,
                               context.operand(q.getInput()), context.result(0),
                               context.result(1), context.result(2)),
                 rows, kCudaThreads);
  return success();
}

LogicalResult emitMatmulInt8Cuda(MatmulInt8Op m, CudaKernelContext &context) {
  auto [rows, k] = verification::rowsAndDepth(m.getLhs());
  int64_t n = shapeOf(m.getRhs())[0];
  std::vector<std::string> operands = context.operands(m->getOperands());
  context.include(kCudaKernels);
  // cuBLASLt's int8 kernels take N and K in multiples of 8 and more than
  // 16 rows (PyTorch's _int_mm asks the same); other shapes, a
  // classifier's 10 outputs, take a kernel of ours.
  if (n % 8 || k % 8 || rows <= 16) {
    context.launch(llvm::formatv("matmulInt8Small({0}, {1}, {2}, {3}, {4});",
                                 rows, n, k, llvm::join(operands, ", "),
                                 context.result()),
                   gridFor(rows * n), kCudaThreads);
    return success();
  }
  // cuBLASLt's int8 GEMM writes int32 products into the result's buffer
  // (as wide as the f32 result), rescaled there in place.
  CudaGemm product;
  product.a = m.getLhs();
  product.b = m.getRhs();
  product.c = m.getResult();
  product.transposeB = true;
  product.m = rows;
  product.n = n;
  product.k = product.lda = product.ldb = k;
  product.ldc = n;
  product.type = "I8";
  context.gemm(product);
  context.launch(
      llvm::formatv("int8Rescale({0}, {1}, reinterpret_cast<const int32_t "
                    "*>({2}), {3}, {4}, {5}, {6}, {2});",
                    rows, n, context.result(), operands[1], operands[2],
                    operands[4], operands[5]),
      gridFor(rows * n), kCudaThreads);
  return success();
}

LogicalResult emitDequantizeCuda(DequantizeOp d, CudaKernelContext &context) {
  int64_t n = product(shapeOf(d.getResult()));
  context.include(kCudaKernels);
  context.launch(
      llvm::formatv("dequantize({0}, {1}, {2}, {3}, {4});", n,
                    shapeOf(d.getScale())[0], d.getBits(),
                    llvm::join(context.operands(d->getOperands()), ", "),
                    context.result()),
      gridFor(n), kCudaThreads);
  return success();
}

LogicalResult emitMatmulSparse24Cuda(MatmulSparse24Op,
                                     CudaKernelContext &context) {
  // cuSPARSELt is the library for 2:4 sparse tensor cores; the CUDA
  // toolkit does not ship it.
  context.refuse("2:4-sparse weights on the GPU need cuSPARSELt, which "
                 "this CUDA toolkit does not include; run with --device "
                 "cpu, or prune with magnitude(...) for CSR weights");
  return success();
}

LogicalResult emitMatmulCsrCuda(MatmulCsrOp m, CudaKernelContext &context) {
  auto [rows, k] = verification::rowsAndDepth(m.getLhs());
  int64_t n = shapeOf(m.getRowOffsets())[0] - 1;
  std::vector<std::string> operands = context.operands(m->getOperands());
  auto [narrow, wide] = csrColumns(m, operands[2]);
  context.include(kCudaKernels);
  // A block per output channel (a row of the CSR weight).
  context.launch(llvm::formatv("matmulCsr(r, {0}, {1}, {2}, {3}, {4}, {5}, "
                               "{6}, {7}, {8}, {9});",
                               rows, n, k, shapeOf(m.getValues())[0],
                               operands[0], operands[1], narrow, wide,
                               operands[3], context.result()),
                 n, kCudaThreads);
  return success();
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerQuantizationEmissionModels(MLIRContext &context) {
  KernelFunctions<ObserveMinMaxOp, emitObserveMinMaxCpu,
                  emitObserveMinMaxCuda>::attach(context);
  KernelFunctions<FakeQuantOp, emitFakeQuantCpu<FakeQuantOp>,
                  emitFakeQuantCuda<FakeQuantOp>>::attach(context);
  KernelFunctions<FakeQuantGradOp, emitFakeQuantCpu<FakeQuantGradOp>,
                  emitFakeQuantCuda<FakeQuantGradOp>>::attach(context);
  KernelFunctions<QuantizeRowsOp, emitQuantizeRowsCpu,
                  emitQuantizeRowsCuda>::attach(context);
  KernelFunctions<MatmulInt8Op, emitMatmulInt8Cpu, emitMatmulInt8Cuda>::attach(
      context);
  KernelFunctions<DequantizeOp, emitDequantizeCpu, emitDequantizeCuda>::attach(
      context);
  KernelFunctions<MatmulSparse24Op, emitMatmulSparse24Cpu,
                  emitMatmulSparse24Cuda>::attach(context);
  KernelFunctions<MatmulCsrOp, emitMatmulCsrCpu, emitMatmulCsrCuda>::attach(
      context);
}
