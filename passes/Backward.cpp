//===- Backward.cpp - Reverse-mode differentiation ------------------------===//

#include "passes/Backward.h"
#include "lang/MnemoOps.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mnemo;

namespace {

/// Sums the gradient contributions of values. A value read in pieces
/// (slices along one axis: a scan's steps, an LSTM's four gates) gets one
/// slice_grad per piece, each a zero tensor of its full size; when the
/// pieces tile the value (step 1, disjoint, covering the axis) their
/// gradients are joined by one concat instead, so the backward of a scan
/// over T steps is O(T), not O(T^2) in time and memory.
class GradientSums {
public:
  explicit GradientSums(OpBuilder &b) : b(b) {}

  void add(Value value, Value grad, Location loc) {
    if (!grad)
      return;
    auto piece = grad.getDefiningOp<SliceGradOp>();
    if (piece && piece.getStep() == 1 && grad.use_empty()) {
      pieces[value].push_back(piece);
      return;
    }
    sum(value, grad, loc);
  }

  /// The gradient of `value`, its pieces joined.
  Value get(Value value) {
    auto it = pieces.find(value);
    if (it != pieces.end()) {
      SmallVector<SliceGradOp> list = std::move(it->second);
      pieces.erase(it);
      join(value, list);
    }
    return sums.lookup(value);
  }

  llvm::DenseMap<Value, Value> finish() {
    SmallVector<Value> pending;
    for (auto &entry : pieces)
      pending.push_back(entry.first);
    for (Value value : pending)
      get(value);
    return std::move(sums);
  }

private:
  void sum(Value value, Value grad, Location loc) {
    Value &slot = sums[value];
    slot = slot ? b.create<AddOp>(loc, slot.getType(), slot, grad).getResult()
                : grad;
  }

  void join(Value value, SmallVector<SliceGradOp> &list) {
    llvm::sort(list, [](SliceGradOp x, SliceGradOp y) {
      return x.getStart() < y.getStart();
    });
    auto type = llvm::cast<RankedTensorType>(value.getType());
    uint64_t axis = list.front().getAxis();
    int64_t covered = 0;
    bool tiles = list.size() > 1;
    for (SliceGradOp piece : list) {
      tiles &= piece.getAxis() == axis && int64_t(piece.getStart()) == covered;
      covered = int64_t(piece.getEnd());
    }
    tiles &= covered == type.getDimSize(axis);
    if (!tiles) {
      for (SliceGradOp piece : list)
        sum(value, piece.getResult(), piece.getLoc());
      return;
    }
    SmallVector<Value> inputs;
    for (SliceGradOp piece : list)
      inputs.push_back(piece.getGrad());
    Value joined = b.create<ConcatOp>(list.front().getLoc(), type, inputs, axis)
                       .getResult();
    for (SliceGradOp piece : list)
      piece.erase();
    sum(value, joined, joined.getLoc());
  }

  OpBuilder &b;
  llvm::DenseMap<Value, Value> sums;
  llvm::MapVector<Value, SmallVector<SliceGradOp>> pieces;
};

} // namespace

FailureOr<llvm::DenseMap<Value, Value>>
mnemo::buildBackward(OpBuilder &b, ArrayRef<Operation *> ops, Value output,
                     Value seed) {
  GradientSums grads(b);
  grads.add(output, seed, output.getLoc());
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultGrads;
    bool reached = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(grads.get(result));
      reached |= bool(resultGrads.back());
    }
    if (!reached)
      continue;
    auto rule = llvm::dyn_cast<GradientOpInterface>(op);
    if (!rule) {
      if (op->hasTrait<NoGradient>())
        continue;
      return op->emitError("has no gradient rule");
    }
    SmallVector<Value> operandGrads = rule.buildGradient(b, resultGrads);
    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads))
      grads.add(operand, grad, op->getLoc());
  }
  return grads.finish();
}
