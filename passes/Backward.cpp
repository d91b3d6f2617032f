//===- Backward.cpp - Reverse-mode differentiation ------------------------===//

#include "passes/Backward.h"
#include "lang/MnemoOps.h"

using namespace mlir;
using namespace mnemo;

FailureOr<llvm::DenseMap<Value, Value>>
mnemo::buildBackward(OpBuilder &b, ArrayRef<Operation *> ops, Value output,
                     Value seed) {
  llvm::DenseMap<Value, Value> grads;
  auto accumulate = [&](Value value, Value grad, Location loc) {
    if (!grad)
      return;
    Value &slot = grads[value];
    slot = slot ? b.create<AddOp>(loc, slot.getType(), slot, grad).getResult()
                : grad;
  };
  accumulate(output, seed, output.getLoc());
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultGrads;
    bool reached = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(grads.lookup(result));
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
      accumulate(operand, grad, op->getLoc());
  }
  return grads;
}
