//===- OptimizersOps.cpp - Checks of the optimizer's ops ------------------===//
//
// The schedule's kind, adamw8bit's state shapes, and the global norm's
// CUDA scratch: one partial sum of squares per block of its first pass.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/OpVerification.h"

#include <algorithm>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;

LogicalResult LrScheduleOp::verify() {
  if (getKind() != "constant" && getKind() != "cosine")
    return emitOpError("kind must be constant or cosine, not ") << getKind();
  return success();
}

LogicalResult Adam8bitUpdateOp::verify() {
  // One byte per parameter element, one maximum per block.
  if (shapeOf(getExpAvgCodes()) != shapeOf(getParam()))
    return emitOpError("the moment codes must have the parameter's shape");
  int64_t block = getBlockSize();
  if (block <= 0)
    return emitOpError("block_size must be positive");
  int64_t elements = tensorType(getParam()).getNumElements();
  auto absmax = tensorType(getExpAvgAbsmax());
  int64_t blocks = (elements + block - 1) / block;
  if (absmax.getRank() != 1 || absmax.getDimSize(0) != blocks)
    return emitOpError() << "the moment maxima must be [" << blocks
                         << "] (one per block of " << block << " elements)";
  return success();
}

int64_t GlobalNormOp::getCudaBlocks() {
  // 256 elements a block at least, at most 1024 blocks (grid-stride).
  int64_t n = 0;
  for (Value v : getInputs())
    n += tensorType(v).getNumElements();
  return std::clamp<int64_t>((n + 255) / 256, 1, 1024);
}
int64_t GlobalNormOp::getCudaScratchBytes() { return getCudaBlocks() * 4; }
