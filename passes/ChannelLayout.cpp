//===- ChannelLayout.cpp - Activations the CPU keeps in channel blocks ----===//
//
// Which values plan-memory marks channel_blocked (ChannelLayout.h): the
// candidates are the results of ops that can write the blocked layout and
// whose every reader can read it; values tied to one layout at an op (a
// batch norm's input and output, an elementwise op's operands and result)
// then lose the mark together until no tie is broken.
//
//===----------------------------------------------------------------------===//

#include "passes/ChannelLayout.h"
#include "lang/MnemoOps.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mnemo;

namespace {

/// Read as a scalar by the loops, whatever the layout: a splat constant or
/// a 0-d tensor.
bool readAsScalar(Value v) {
  if (auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
      type && type.getRank() == 0)
    return true;
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return false;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
  return dense && dense.isSplat();
}

/// A 4-d float tensor (f32, or 16-bit storage, which oneDNN's bf16
/// convolutions read in the same blocks) whose channels fill whole
/// 16-channel blocks, so that the blocked layout (8 or 16 channels a block)
/// has the plain one's size.
bool hasBlockableShape(Value v) {
  auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape() && type.getRank() == 4 &&
         (type.getElementType().isF32() || type.getElementType().isBF16() ||
          type.getElementType().isF16()) &&
         type.getDimSize(1) > 0 && type.getDimSize(1) % 16 == 0;
}

/// Ops whose first result can be written blocked.
bool writesBlocked(Operation *op) {
  return llvm::isa<Conv2DOp, Conv2DInputGradOp, BatchNormOp, BatchNormApplyOp,
                   BatchNormGradOp>(op) ||
         (op->hasTrait<FusionElementwise>() && op->getNumResults() == 1);
}

/// Whether the reader takes the operand blocked: a convolution's
/// activation operands (not the weights), a batch norm's (and
/// batch_norm_apply's) input and its
/// gradient's output gradient and input, an elementwise op's operands.
bool readsBlocked(OpOperand &use) {
  Operation *op = use.getOwner();
  unsigned index = use.getOperandNumber();
  if (llvm::isa<Conv2DOp, Conv2DInputGradOp, BatchNormOp, BatchNormApplyOp>(op))
    return index == 0;
  if (llvm::isa<Conv2DWeightGradOp, BatchNormGradOp>(op))
    return index <= 1;
  return op->hasTrait<FusionElementwise>();
}

/// The values that must share a layout at `op`: the kernels of batch norm
/// index their input and output (gradients) alike, and a loop reads every
/// operand at its result's index.
SmallVector<Value> tiedAt(Operation *op) {
  if (llvm::isa<BatchNormOp, BatchNormApplyOp>(op))
    return {op->getOperand(0), op->getResult(0)};
  if (llvm::isa<BatchNormGradOp>(op))
    return {op->getOperand(0), op->getOperand(1), op->getResult(0)};
  if (!op->hasTrait<FusionElementwise>())
    return {};
  SmallVector<Value> tied(op->getResults());
  for (Value operand : op->getOperands())
    if (!readAsScalar(operand))
      tied.push_back(operand);
  return tied;
}

} // namespace

llvm::DenseSet<Value>
mnemo::channelBlockedValues(const BufferAnalysis &analysis) {
  llvm::DenseSet<Value> blocked;
  for (Operation *op : analysis.order) {
    if (!writesBlocked(op))
      continue;
    Value v = op->getResult(0);
    if (hasBlockableShape(v) &&
        analysis.placement.lookup(v).where != Placement::Where::Argument &&
        !analysis.stridedViews.count(v) &&
        llvm::all_of(v.getUses(), readsBlocked))
      blocked.insert(v);
  }
  // A tie with one plain value makes the others plain; that may break
  // ties elsewhere, so again until none changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation *op : analysis.order) {
      SmallVector<Value> tied = tiedAt(op);
      if (llvm::all_of(tied, [&](Value v) { return blocked.count(v); }))
        continue;
      for (Value v : tied)
        changed |= blocked.erase(v);
    }
  }
  return blocked;
}
