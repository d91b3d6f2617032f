//===- PruningInterpreter.cpp - Pruning in the reference interpreter ------===//
//
// The interpreter's model of prune_masks and apply_mask. The masks are
// chosen by the interpreter's own rules (PruningReference.cpp: a stable
// sort, where the trainer's kernels select by radix), so the differential
// tests compare two implementations. The interpreter keeps a mask's i32
// words in doubles and works on one bool per element.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/pruning/PruningReference.h"

#include <cstdint>
#include <vector>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// A mask tensor's bits, one per element of the pruned tensor: the runtime
/// stores bit j of 32-bit word w for element 32 w + j, a set bit for a
/// pruned element.
std::vector<bool> maskBitsOf(const Tensor &mask, int64_t elements) {
  std::vector<bool> bits(elements);
  for (int64_t e = 0; e < elements; ++e)
    bits[e] = (uint32_t(int32_t(mask.data[e / 32])) >> (e % 32)) & 1u;
  return bits;
}

void setMaskBits(const std::vector<bool> &bits, Tensor &mask) {
  std::vector<uint32_t> words(mask.data.size(), 0u);
  for (size_t e = 0; e < bits.size(); ++e)
    words[e / 32] |= uint32_t(bits[e]) << (e % 32);
  for (size_t w = 0; w < words.size(); ++w)
    mask.data[w] = double(int32_t(words[w]));
}

LogicalResult interpretPruneMasks(PruneMasksOp op, OpContext &context) {
  StringRef method = op.getMethod();
  double finalSparsity = method == "nm"
                             ? 1.0 - double(op.getN()) / double(op.getM())
                             : op.getSparsity().convertToDouble();
  std::optional<double> sparsity = reference::scheduledSparsity(
      int64_t(context.get(op.getStep()).data[0]), op.getStart(), op.getEnd(),
      op.getEvery(), finalSparsity);
  size_t count = op.getWeights().size();
  std::vector<reference::PruneTarget> targets(count);
  for (size_t t = 0; t < count; ++t) {
    const Tensor &w = context.get(op.getWeights()[t]);
    targets[t].weight = w.data;
    targets[t].shape = w.shape;
    targets[t].pruned =
        maskBitsOf(context.get(op.getMasks()[t]), w.numElements());
  }
  if (sparsity) {
    if (method == "magnitude")
      reference::pruneByMagnitude(targets, *sparsity);
    else
      for (reference::PruneTarget &target : targets) {
        if (method == "structured")
          reference::pruneStructured(target, *sparsity, op.getDim(),
                                     op.getNorm() == "l1");
        else
          reference::pruneNofM(target, int(op.getN()), int(op.getM()));
      }
  }
  Tensor flag = context.like(op.getUpdated());
  flag.data[0] = sparsity ? 1.0 : 0.0;
  context.set(op.getUpdated(), std::move(flag));
  for (size_t t = 0; t < count; ++t) {
    Tensor out = context.like(op.getNewMasks()[t]);
    setMaskBits(targets[t].pruned, out);
    context.set(op.getNewMasks()[t], std::move(out));
  }
  return success();
}

LogicalResult interpretApplyMask(ApplyMaskOp op, OpContext &context) {
  Tensor out = context.get(op.getInput());
  bool masking = !op.getWhen() || context.get(op.getWhen()).data[0] != 0;
  if (masking) {
    std::vector<bool> pruned =
        maskBitsOf(context.get(op.getMask()), out.numElements());
    for (int64_t i = 0; i < out.numElements(); ++i)
      if (pruned[i])
        out.data[i] = 0.0;
  }
  return context.finish(op.getResult(), std::move(out));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerPruningInterpreterModels(MLIRContext &context) {
  InterpreterFunction<PruneMasksOp, interpretPruneMasks>::attach(context);
  InterpreterFunction<ApplyMaskOp, interpretApplyMask>::attach(context);
}
