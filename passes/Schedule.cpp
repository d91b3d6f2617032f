//===- Schedule.cpp - A memory-aware order for the step functions ---------===//

#include "passes/BufferAnalysis.h"
#include "passes/MemoryPlanner.h"
#include "passes/Passes.h"
#include "passes/Pruning.h"

#include "lang/MnemoOps.h"
#include "lang/PlanAttributes.h"

#include <queue>

namespace mnemo {
#define GEN_PASS_DEF_SCHEDULE
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

/// The most arena bytes live at once under the block's current order.
FailureOr<int64_t> arenaLowerBound(func::FuncOp func) {
  FailureOr<BufferAnalysis> analysis = BufferAnalysis::analyze(func);
  if (failed(analysis))
    return failure();
  std::vector<BufferInterval> intervals;
  for (const ArenaBuffer &b : analysis->buffers)
    intervals.push_back(b.interval);
  return lowerBound(intervals);
}

/// Bytes an op's results take in the arena (views and constants take none).
int64_t allocatedBytes(Operation *op) {
  if (llvm::isa<ConstantOp, ReshapeOp>(op))
    return 0;
  int64_t bytes = 0;
  for (Value result : op->getResults())
    bytes += storageBytes(result.getType());
  return bytes;
}

/// Write-after-read edges: an update written into its argument must follow
/// every other reader of that argument (and of views of it). Returns the
/// updates each reader unblocks, and counts them in `waiting`.
llvm::DenseMap<Operation *, SmallVector<Operation *>>
writeAfterReadEdges(func::FuncOp func,
                    llvm::DenseMap<Operation *, int64_t> &waiting) {
  Block &body = func.getBody().front();
  Operation *terminator = body.getTerminator();
  llvm::DenseMap<Operation *, SmallVector<Operation *>> unblocks;
  for (unsigned r = 0; r < terminator->getNumOperands(); ++r) {
    std::optional<unsigned> reuses = plan::reusedArgument(func, r);
    if (!reuses)
      continue;
    // (A pruned weight: the optimizer's update, masked in place.)
    Operation *update =
        Pruning::maskedChain(terminator->getOperand(r)).back().getDefiningOp();
    if (!update)
      continue;
    llvm::SmallPtrSet<Operation *, 8> readers;
    SmallVector<Value> work{body.getArgument(*reuses)};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (user == update || user == terminator)
          continue;
        readers.insert(user);
        if (auto view = llvm::dyn_cast<ReshapeOp>(user))
          work.push_back(view.getResult());
      }
    }
    for (Operation *reader : readers) {
      unblocks[reader].push_back(update);
      ++waiting[update];
    }
  }
  return unblocks;
}

struct SchedulePass : public mnemo::impl::ScheduleBase<SchedulePass> {
  void runOnOperation() override {
    for (func::FuncOp func : stepFunctions(getOperation()))
      if (failed(schedule(func)))
        return signalPassFailure();
  }

  LogicalResult schedule(func::FuncOp func) {
    Block &body = func.getBody().front();
    Operation *terminator = body.getTerminator();
    SmallVector<Operation *> original;
    for (Operation &op : body.without_terminator())
      original.push_back(&op);
    FailureOr<int64_t> before = arenaLowerBound(func);
    if (failed(before))
      return failure();

    llvm::DenseMap<Operation *, size_t> position;
    for (auto [i, op] : llvm::enumerate(original))
      position[op] = i;
    // Uses still to run, per value; dependencies still to run, per op.
    llvm::DenseMap<Value, int64_t> remainingUses;
    llvm::DenseMap<Operation *, int64_t> waiting;
    for (Operation *op : original) {
      llvm::SmallPtrSet<Operation *, 4> producers;
      for (Value operand : op->getOperands()) {
        ++remainingUses[operand];
        if (Operation *def = operand.getDefiningOp())
          producers.insert(def);
      }
      waiting[op] = producers.size();
    }
    for (Value v : terminator->getOperands())
      ++remainingUses[v]; // returned values never die
    llvm::DenseMap<Operation *, SmallVector<Operation *>> unblocks =
        writeAfterReadEdges(func, waiting);
    auto freedBy = [&](Operation *op) {
      int64_t bytes = 0;
      llvm::SmallDenseMap<Value, int64_t> uses;
      for (Value operand : op->getOperands())
        ++uses[operand];
      for (auto [value, count] : uses) {
        Operation *def = value.getDefiningOp();
        if (def && remainingUses[value] == count)
          bytes +=
              allocatedBytes(def) / std::max<unsigned>(1, def->getNumResults());
      }
      return bytes;
    };

    // The ready op that frees the most net bytes, the earliest on ties,
    // from a heap: a linear scan of the ready ops at every step is
    // quadratic in a deep model's ops. An op's score only grows (its
    // operands' remaining uses only fall), and it changes only when an
    // operand's remaining uses fall to the op's own uses of it: then the op
    // is pushed again with its new score, and the stale entry is skipped.
    struct Entry {
      int64_t score;
      size_t position;
      Operation *op;
      uint32_t version;
      bool operator<(const Entry &o) const {
        return score != o.score ? score < o.score : position > o.position;
      }
    };
    std::priority_queue<Entry> heap;
    int64_t mostOperands = 0;
    for (Operation *op : original)
      mostOperands = std::max<int64_t>(mostOperands, op->getNumOperands());
    llvm::DenseMap<Operation *, uint32_t> version; // of ready ops
    auto push = [&](Operation *op) {
      heap.push(
          {freedBy(op) - allocatedBytes(op), position[op], op, ++version[op]});
    };
    for (Operation *op : original)
      if (waiting[op] == 0)
        push(op);
    SmallVector<Operation *> order;
    while (!heap.empty()) {
      Entry top = heap.top();
      heap.pop();
      auto current = version.find(top.op);
      if (current == version.end() || current->second != top.version)
        continue; // scheduled already, or pushed again since
      Operation *op = top.op;
      version.erase(current);
      order.push_back(op);
      for (Value operand : op->getOperands()) {
        int64_t left = --remainingUses[operand];
        if (left > mostOperands)
          continue; // no op's score depends on it yet (a value many read)
        for (Operation *user : operand.getUsers())
          if (user != op && version.count(user) &&
              left <= int64_t(user->getNumOperands()))
            push(user);
      }
      llvm::SmallPtrSet<Operation *, 8> users;
      for (Value result : op->getResults())
        for (Operation *user : result.getUsers())
          if (user != terminator)
            users.insert(user);
      // Data edges count once per producer; write-after-read edges once per
      // reader, so an op can be both for the same update.
      for (Operation *user : users)
        if (--waiting[user] == 0)
          push(user);
      for (Operation *update : unblocks.lookup(op))
        if (--waiting[update] == 0)
          push(update);
    }
    if (order.size() != original.size())
      return func.emitError("internal error: the schedule lost ops");

    for (Operation *op : order)
      op->moveBefore(terminator);
    FailureOr<int64_t> after = arenaLowerBound(func);
    if (failed(after))
      return failure();
    if (*after > *before)
      for (Operation *op : original)
        op->moveBefore(terminator);
    return success();
  }
};
} // namespace
