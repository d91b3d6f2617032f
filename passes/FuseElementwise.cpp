//===- FuseElementwise.cpp - Elementwise chains become one loop
//------------===//
//
// Marks the producers that a consumer's loop computes on the fly. An op is
// fused into its consumer when
//   - it is elementwise,
//   - every use of its result is in one op, which is itself elementwise and
//     has a result of the same shape (so one loop index serves both), and
//   - that consumer is not the function's return, and
//   - the operands that die at it do not then outlive it by more bytes than
//     its result would take, across other work (extendsLifetimes).
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
  // Returns and in-place updates have no result to fuse.
  if (producer->getNumResults() == 0)
    return false;
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

/// The bytes of `producer`'s operands that die at it (a fused operand
/// has no buffer: its own operands count instead).
int64_t dyingOperandBytes(Operation *producer,
                          const llvm::DenseMap<Operation *, unsigned> &position,
                          const llvm::DenseSet<Operation *> &fused) {
  unsigned from = position.lookup(producer);
  int64_t bytes = 0;
  for (Value operand : producer->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (!def || llvm::isa<ConstantOp>(def))
      continue;
    if (fused.contains(def)) {
      bytes += dyingOperandBytes(def, position, fused);
      continue;
    }
    bool readLater = llvm::any_of(operand.getUsers(), [&](Operation *user) {
      auto at = position.find(user);
      return at == position.end() || (at->second > from && user != producer);
    });
    if (!readLater)
      bytes += storageBytes(operand.getType());
  }
  return bytes;
}

/// Whether computing `producer` in its consumer's loop would keep more
/// bytes alive than its own buffer does: its operands that die at it
/// would live on to the consumer, across work that runs in between (an op
/// between them that is not itself computed in a loop). A gradient summed
/// over many uses of a weight (x1 + x2, + x3, ... each added as the
/// backward produces it) fused into one loop would keep every term alive
/// until the last: 32 terms of a weight used 32 times, where adding each
/// as it comes keeps one.
bool extendsLifetimes(Operation *producer,
                      const llvm::DenseMap<Operation *, unsigned> &position,
                      const llvm::DenseSet<Operation *> &fusible,
                      const llvm::DenseSet<Operation *> &fused) {
  Operation *consumer = soleUser(producer->getResult(0));
  bool workBetween = false;
  for (Operation *op = producer->getNextNode(); op && op != consumer;
       op = op->getNextNode())
    if (!fusible.contains(op) && !llvm::isa<ConstantOp>(op)) {
      workBetween = true;
      break;
    }
  return workBetween && dyingOperandBytes(producer, position, fused) >
                            storageBytes(producer->getResult(0).getType());
}

struct FuseElementwisePass
    : public mnemo::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    for (func::FuncOp func : stepFunctions(getOperation())) {
      llvm::DenseMap<Operation *, unsigned> position;
      llvm::DenseSet<Operation *> fusible, fused;
      for (Operation &op : func.getBody().front()) {
        position[&op] = position.size();
        if (canFuseInto(&op))
          fusible.insert(&op);
      }
      for (Operation &op : func.getBody().front())
        if (fusible.contains(&op) &&
            (llvm::isa<BroadcastOp>(op) ||
             !extendsLifetimes(&op, position, fusible, fused))) {
          plan::markFused(&op);
          fused.insert(&op);
        }
    }
  }
};

} // namespace
