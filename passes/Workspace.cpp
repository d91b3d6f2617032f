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

int64_t mnemo::workspaceBytes(Operation *op) {
  ConvGeometry g;
  if (!convGeometry(op, g))
    return 0;
  return alignUp(4 * g.imagesPerGemm * (g.c * g.kh * g.kw + g.o) * g.ho * g.wo);
}
