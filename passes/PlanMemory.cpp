//===- PlanMemory.cpp - Arena offsets for the step functions --------------===//

#include "passes/BufferAnalysis.h"
#include "passes/MemoryPlanner.h"
#include "passes/Passes.h"

#include "lang/MnemoOps.h"

#include "mlir/IR/Builders.h"

namespace mnemo {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {
struct PlanMemoryPass : public mnemo::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    for (func::FuncOp func : stepFunctions(getOperation()))
      if (failed(plan(func)))
        return signalPassFailure();
  }

  LogicalResult plan(func::FuncOp func) {
    FailureOr<BufferAnalysis> analysis = BufferAnalysis::analyze(func);
    if (failed(analysis))
      return failure();
    std::vector<BufferInterval> intervals;
    for (const ArenaBuffer &b : analysis->buffers)
      intervals.push_back(b.interval);
    MemoryPlan plan = planHeuristic(intervals);
    if (plan.arenaBytes == lowerBound(intervals)) {
      plan.method += ", optimal"; // it meets the lower bound
    } else if (int64_t(intervals.size()) <= exactMaxBuffers) {
      auto limit = std::chrono::milliseconds(exactTimeLimitMs);
      if (auto exact = planExact(intervals, limit, &plan)) {
        if (exact->arenaBytes < plan.arenaBytes)
          plan = *exact;
        else
          plan.method += ", optimal"; // the exact search found nothing better
      }
    }
    std::string error;
    if (!verifyPlan(intervals, plan, error))
      return func.emitError()
             << "internal error: the memory plan is invalid: " << error;

    Builder b(func.getContext());
    for (Operation *op : analysis->order) {
      SmallVector<int64_t> offsets, sizes, aliases;
      bool anyAlias = false;
      for (Value result : op->getResults()) {
        Placement p = analysis->placement.lookup(result);
        bool inArena = p.where == Placement::Where::Arena;
        offsets.push_back(inArena ? plan.offsets[p.buffer] : -1);
        sizes.push_back(inArena ? analysis->buffers[p.buffer].interval.size
                                : 0);
        aliases.push_back(
            p.where == Placement::Where::Argument ? int64_t(p.argument) : -1);
        anyAlias |= p.where == Placement::Where::Argument;
      }
      if (op->getNumResults() == 1 &&
          analysis->stridedViews.count(op->getResult(0)))
        op->setAttr("mnemo.strided_view", b.getUnitAttr());
      op->setAttr("mnemo.offset", b.getDenseI64ArrayAttr(offsets));
      op->setAttr("mnemo.size", b.getDenseI64ArrayAttr(sizes));
      if (anyAlias)
        op->setAttr("mnemo.alias_arg", b.getDenseI64ArrayAttr(aliases));
    }
    func->setAttr("mnemo.arena_bytes", b.getI64IntegerAttr(plan.arenaBytes));
    func->setAttr("mnemo.lower_bound_bytes",
                  b.getI64IntegerAttr(lowerBound(intervals)));
    func->setAttr("mnemo.naive_bytes",
                  b.getI64IntegerAttr(naiveBytes(intervals)));
    func->setAttr("mnemo.planner", b.getStringAttr(plan.method));
    return success();
  }
};
} // namespace
