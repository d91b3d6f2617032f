//===- Workspace.cpp - Scratch memory of ops that need it -----------------===//

#include "passes/Workspace.h"
#include "passes/MemoryPlanner.h"

#include "lang/MnemoOps.h"

#include <algorithm>

using namespace mlir;
using namespace mnemo;

namespace {
/// Scratch per convolution: enough for large GEMMs, small next to the
/// arena of any model with convolutions worth the name.
constexpr int64_t kConvScratchBytes = 4 << 20;

ArrayRef<int64_t> shapeOf(Value v) {
  return llvm::cast<ShapedType>(v.getType()).getShape();
}
} // namespace

bool mnemo::convGeometry(Operation *op, ConvGeometry &g) {
  ArrayRef<int64_t> x, w, y, stride, padding;
  if (auto c = llvm::dyn_cast<Conv2DOp>(op)) {
    x = shapeOf(c.getInput());
    w = shapeOf(c.getWeight());
    y = shapeOf(c.getResult());
    stride = c.getStride();
    padding = c.getPadding();
  } else if (auto c = llvm::dyn_cast<Conv2DInputGradOp>(op)) {
    y = shapeOf(c.getGrad());
    w = shapeOf(c.getWeight());
    x = shapeOf(c.getResult());
    stride = c.getStride();
    padding = c.getPadding();
  } else if (auto c = llvm::dyn_cast<Conv2DWeightGradOp>(op)) {
    y = shapeOf(c.getGrad());
    x = shapeOf(c.getInput());
    w = shapeOf(c.getResult());
    stride = c.getStride();
    padding = c.getPadding();
  } else {
    return false;
  }
  g = {x[0], x[1], x[2],      x[3],      w[0],       w[2],       w[3],
       y[2], y[3], stride[0], stride[1], padding[0], padding[1], 1};
  int64_t perImage = 4 * (g.c * g.kh * g.kw + g.o) * g.ho * g.wo;
  g.imagesPerGemm = std::clamp<int64_t>(
      kConvScratchBytes / std::max<int64_t>(1, perImage), 1, g.n);
  return true;
}

namespace {
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
  ConvGeometry g;
  if (!convGeometry(op, g))
    return 0;
  int64_t scratch =
      4 * g.imagesPerGemm * (g.c * g.kh * g.kw + g.o) * g.ho * g.wo;
  // On 16-bit storage the operands and the result are widened to f32 too.
  if (isHalf(op->getResult(0)))
    scratch += 4 * (elements(op->getOperand(0)) + elements(op->getOperand(1)) +
                    elements(op->getResult(0)));
  return alignUp(scratch);
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
