//===- FuseElementwise.cpp - Elementwise chains become one loop
//------------===//
//
// Marks the producers that a consumer's loop computes on the fly. An op is
// fused into its consumer when
//   - it is elementwise,
//   - every use of its result is in one op, which is itself elementwise and
//     has a result of the same shape (so one loop index serves both), and
//   - that consumer is not the function's return.
// A broadcast (read with stride 0) fuses into all its consumers when every
// one of them is such a loop.
// Marked values get no buffer (BufferAnalysis), and the values they read
// stay live until the root of the fused tree runs.
//
//===----------------------------------------------------------------------===//

#include "passes/BufferAnalysis.h"
#include "passes/Fusion.h"
#include "passes/Passes.h"

#include "lang/MnemoOps.h"
#include "lang/PlanAttributes.h"

#include "mlir/IR/Builders.h"

namespace mnemo {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

bool mnemo::isElementwiseKernel(Operation *op) {
  // The op's declared fusion class (MnemoInterfaces.td).
  return op->hasTrait<FusionElementwise>();
}

bool mnemo::isFused(Operation *op) { return plan::isFused(op); }

void mnemo::fusionRoots(Operation *op, SmallVectorImpl<Operation *> &roots) {
  if (!isFused(op)) {
    roots.push_back(op);
    return;
  }
  for (Operation *user : op->getResult(0).getUsers())
    fusionRoots(user, roots);
}

namespace {

/// The one op that uses `v`, or null when there are none or several.
Operation *soleUser(Value v) {
  Operation *user = nullptr;
  for (Operation *u : v.getUsers()) {
    if (user && u != user)
      return nullptr;
    user = u;
  }
  return user;
}

/// Whether `user` runs a loop over `value`'s shape that can compute it.
bool loopCanCompute(Operation *user, Value value) {
  return !llvm::isa<func::ReturnOp>(user) && isElementwiseKernel(user) &&
         llvm::cast<ShapedType>(user->getResult(0).getType()).getShape() ==
             llvm::cast<ShapedType>(value.getType()).getShape();
}

bool canFuseInto(Operation *producer) {
  Value result = producer->getResult(0);
  // A broadcast is an index computation: every consumer's loop can do it.
  if (llvm::isa<BroadcastOp>(producer))
    return !result.use_empty() &&
           llvm::all_of(result.getUsers(), [&](Operation *user) {
             return loopCanCompute(user, result);
           });
  if (!isElementwiseKernel(producer))
    return false;
  Operation *user = soleUser(result);
  return user && loopCanCompute(user, result);
}

struct FuseElementwisePass
    : public mnemo::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    for (func::FuncOp func : stepFunctions(getOperation()))
      func.walk([&](Operation *op) {
        if (op->getParentOp() == func.getOperation() && canFuseInto(op))
          plan::markFused(op);
      });
  }
};

} // namespace
