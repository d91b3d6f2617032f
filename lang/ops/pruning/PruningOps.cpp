//===- PruningOps.cpp - Shape checks of the pruning ops -------------------===//
//
// A mask is one bit per element of the tensor it prunes, in i32 words
// (PruningFormulas.h); prune_masks' settings are checked here so that the
// kernels and the interpreter may take them as given. Neither op has a
// gradient: masks are state, and a masked gradient is masked again by the
// update that reads it.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/OpVerification.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::verification;

/// Mask words of a pruned tensor: one bit per element.
static int64_t maskWordsFor(Value v) {
  return (tensorType(v).getNumElements() + 31) / 32;
}

static LogicalResult verifyMask(Operation *op, Value tensor, Value mask) {
  int64_t words = maskWordsFor(tensor);
  if (tensorType(mask).getDimSize(0) != words)
    return op->emitOpError()
           << "a mask of " << tensorType(tensor).getNumElements()
           << " elements must have " << words << " i32 words, not "
           << tensorType(mask).getDimSize(0);
  return success();
}

LogicalResult PruneMasksOp::verify() {
  if (getWeights().size() != getMasks().size() ||
      getMasks().size() != getNewMasks().size())
    return emitOpError("needs one mask and one new mask per weight");
  if (getWeights().empty())
    return emitOpError("needs at least one weight");
  StringRef method = getMethod();
  if (method != "magnitude" && method != "structured" && method != "nm")
    return emitOpError("method must be magnitude, structured or nm");
  if (getSparsity().convertToDouble() < 0 ||
      getSparsity().convertToDouble() >= 1)
    return emitOpError("sparsity must lie in [0, 1)");
  if (getEvery() < 1 || getStart() < 0)
    return emitOpError("every must be positive and start non-negative");
  if (method == "structured" && getNorm() != "l1" && getNorm() != "l2")
    return emitOpError("norm must be l1 or l2");
  int64_t m = getM(), n = getN();
  if (method == "nm" && (m < 2 || m > 32 || (m & (m - 1)) || n < 1 || n >= m))
    return emitOpError("N:M needs m a power of two in [2, 32] and 0 < n < m");
  for (auto [w, mask, out] :
       llvm::zip(getWeights(), getMasks(), getNewMasks())) {
    if (mask.getType() != out.getType())
      return emitOpError("each new mask must have its mask's type");
    if (failed(verifyMask(*this, w, mask)))
      return failure();
    auto type = tensorType(w);
    if (method == "structured" &&
        (int64_t(getDim()) < 0 || int64_t(getDim()) >= type.getRank()))
      return emitOpError() << "dim " << getDim() << " is out of range for "
                           << type;
    int64_t row = type.getRank() >= 2
                      ? type.getNumElements() / type.getDimSize(0)
                      : type.getNumElements();
    if (method == "nm" && row % m != 0)
      return emitOpError() << "N:M groups of " << m
                           << " must divide each row of " << type;
  }
  return success();
}

LogicalResult ApplyMaskOp::verify() {
  return verifyMask(*this, getInput(), getMask());
}
