//===- Workspace.cpp - Scratch memory of ops that need it -----------------===//

#include "passes/Workspace.h"
#include "passes/MemoryPlanner.h"

#include "lang/MnemoOps.h"

#include <algorithm>

using namespace mlir;
using namespace mnemo;

namespace {
ArrayRef<int64_t> shapeOf(Value v) {
  return llvm::cast<ShapedType>(v.getType()).getShape();
}
bool isHalf(Value v) {
  Type e = llvm::cast<ShapedType>(v.getType()).getElementType();
  return e.isBF16() || e.isF16();
}
int64_t elements(Value v) {
  return llvm::cast<ShapedType>(v.getType()).getNumElements();
}
} // namespace

int64_t mnemo::workspaceBytes(Operation *op) {
  // A GEMM on 16-bit storage widens op(A), op(B) and the product to f32
  // (runtime/cpu/Kernels.h gemmHalf), one matrix of the batch at a time.
  if (llvm::isa<MatmulOp, BatchMatmulOp>(op) && isHalf(op->getResult(0))) {
    ArrayRef<int64_t> c = shapeOf(op->getResult(0));
    bool transposeLhs = llvm::isa<MatmulOp>(op)
                            ? llvm::cast<MatmulOp>(op).getTransposeLhs()
                            : llvm::cast<BatchMatmulOp>(op).getTransposeLhs();
    ArrayRef<int64_t> a = shapeOf(op->getOperand(0));
    int64_t k = transposeLhs ? a[a.size() - 2] : a.back();
    int64_t n = c.back(), m = c[c.size() - 2];
    // A plain matmul may run its batch rows as one matrix.
    if (llvm::isa<MatmulOp>(op))
      m = elements(op->getResult(0)) / n;
    return alignUp(4 * (m * k + k * n + m * n));
  }
  // An op that declares its need (its family's FAMILYOps.cpp).
  if (auto declared = llvm::dyn_cast<CpuWorkspaceOpInterface>(op))
    return alignUp(declared.getCpuWorkspaceBytes());
  return 0;
}

//===----------------------------------------------------------------------===//
// The CUDA backend's scratch
//===----------------------------------------------------------------------===//

namespace {
int64_t align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }
} // namespace

int64_t mnemo::sumOfSquaresBlocks(int64_t n) {
  return std::clamp<int64_t>((n + 255) / 256, 1, 1024);
}

int64_t mnemo::cudaScratchBytes(Operation *op) {
  // The op families declare their needs.
  if (auto declared = llvm::dyn_cast<CudaScratchOpInterface>(op))
    return align256(declared.getCudaScratchBytes());
  // global_norm, whose kernels CudaEmitter.cpp still writes: a partial
  // sum of squares per block.
  if (auto g = llvm::dyn_cast<GlobalNormOp>(op)) {
    int64_t total = 0;
    for (Value v : g.getInputs())
      total += elements(v);
    return align256(sumOfSquaresBlocks(total) * 4);
  }
  return 0;
}

int64_t mnemo::gemmPointerTableBytes(Operation *op) {
  if (!llvm::isa<MatmulOp, BatchMatmulOp>(op))
    return 0;
  ArrayRef<int64_t> c = shapeOf(op->getResult(0));
  int64_t products = 1;
  for (size_t d = 0; d + 2 < c.size(); ++d)
    products *= c[d];
  return products > 1 ? align256(3 * 8 * products) : 0;
}
