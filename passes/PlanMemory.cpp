//===- PlanMemory.cpp - Arena offsets for the step functions --------------===//

#include "passes/BufferAnalysis.h"
#include "passes/ChannelLayout.h"
#include "passes/MemoryPlanner.h"
#include "passes/Passes.h"
#include "passes/Workspace.h"

#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"

#include "mlir/IR/Builders.h"

#include <numeric>

namespace mnemo {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {
/// Sorts `gradients` (buffers) by the op that finishes each: its last write
/// before its first read by another op (writes after it, gradient
/// clipping's scaling in place, work on the finished sum).
void sortByReadiness(const BufferAnalysis &analysis,
                     std::vector<size_t> &gradients) {
  llvm::DenseMap<Operation *, unsigned> position;
  for (Operation *op : analysis.order)
    position[op] = position.size();
  auto finished = [&](size_t i) {
    const auto &values = analysis.buffers[i].values;
    llvm::DenseSet<Operation *> writers;
    for (Value v : values)
      if (Operation *def = v.getDefiningOp())
        writers.insert(def);
    unsigned firstRead = ~0u, last = 0;
    for (Value v : values)
      for (Operation *user : v.getUsers())
        if (!writers.contains(user) && position.count(user))
          firstRead = std::min(firstRead, position.lookup(user));
    for (Operation *def : writers)
      if (position.lookup(def) < firstRead)
        last = std::max(last, position.lookup(def));
    return last;
  };
  llvm::DenseMap<size_t, unsigned> finishedAt;
  for (size_t i : gradients)
    finishedAt[i] = finished(i);
  std::stable_sort(gradients.begin(), gradients.end(), [&](size_t a, size_t b) {
    return finishedAt[a] < finishedAt[b];
  });
}

/// The step's arguments in persistent regions by role, laid out in order.
void placeArguments(func::FuncOp func) {
  int64_t regionEnd[kMemoryRegionCount] = {};
  SmallVector<SlotAttr> slots;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    std::optional<ArgumentRole> role = model::argumentRole(func, i);
    MemoryRegion region = role == ArgumentRole::Param ? MemoryRegion::Parameters
                          : role == ArgumentRole::Buffer ? MemoryRegion::Buffers
                          : role == ArgumentRole::OptState
                              ? MemoryRegion::OptimizerState
                              : MemoryRegion::Inputs;
    int64_t &end = regionEnd[int(region)];
    slots.push_back(SlotAttr::get(func.getContext(), region, end));
    end += storageBytes(func.getArgumentTypes()[i]);
  }
  plan::setSlots(func, slots);
}

struct PlanMemoryPass : public mnemo::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    for (func::FuncOp func : stepFunctions(getOperation()))
      if (failed(plan(func)))
        return signalPassFailure();
  }

  /// The arena's placement: the greedy heuristic; above the lower bound, a
  /// local search over the greedy placement order (cheap, and it scales),
  /// then, for small functions, the exact search.
  MemoryPlan placeArena(const std::vector<BufferInterval> &intervals) const {
    MemoryPlan plan = planHeuristic(intervals);
    if (plan.arenaBytes > lowerBound(intervals)) {
      std::vector<size_t> order(intervals.size());
      std::iota(order.begin(), order.end(), 0);
      // Re-derive the winning greedy order: place by size, as the search
      // starts from any order and keeps only improvements.
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return intervals[a].size > intervals[b].size;
      });
      MemoryPlan start = planInOrder(intervals, order);
      start.method = "greedy-by-size";
      MemoryPlan searched =
          improvePlacementOrder(intervals, start, order, localSearchWork);
      if (searched.arenaBytes < plan.arenaBytes)
        plan = std::move(searched);
    }
    if (plan.arenaBytes == lowerBound(intervals)) {
      plan.method += ", optimal"; // it meets the lower bound
    } else if (int64_t(intervals.size()) <= exactMaxBuffers) {
      if (auto exact = planExact(intervals, exactSearchNodes, &plan)) {
        if (exact->arenaBytes < plan.arenaBytes)
          plan = *exact;
        else
          plan.method += ", optimal"; // the exact search found nothing better
      }
    }
    return plan;
  }

  LogicalResult plan(func::FuncOp func) {
    FailureOr<BufferAnalysis> analysis = BufferAnalysis::analyze(func);
    if (failed(analysis))
      return failure();
    // Gradients go to their persistent region, one slot each, in order;
    // everything else is planned in the arena.
    std::vector<int64_t> gradientOffset(analysis->buffers.size(), -1);
    std::vector<size_t> inArena, gradients;
    std::vector<BufferInterval> intervals;
    for (auto [i, b] : llvm::enumerate(analysis->buffers)) {
      if (!transientGradients && b.kind == BufferKind::Gradient) {
        gradients.push_back(i);
        continue;
      }
      inArena.push_back(i);
      intervals.push_back(b.interval);
    }
    // For data parallelism, in the order the step finishes them (the last
    // op writing each), so that buckets of neighbours become ready one
    // after another.
    if (gradientsByReadiness)
      sortByReadiness(*analysis, gradients);
    int64_t gradientBytes = 0;
    for (size_t i : gradients) {
      gradientOffset[i] = gradientBytes;
      gradientBytes += analysis->buffers[i].interval.size;
    }
    MemoryPlan plan = placeArena(intervals);
    std::string error;
    if (!verifyPlan(intervals, plan, error))
      return func.emitError()
             << "internal error: the memory plan is invalid: " << error;
    std::vector<int64_t> arenaOffset(analysis->buffers.size(), -1);
    for (auto [k, i] : llvm::enumerate(inArena))
      arenaOffset[i] = plan.offsets[k];

    MLIRContext *context = func.getContext();
    llvm::DenseSet<Value> blocked = channelBlockedValues(*analysis);
    for (Operation *op : analysis->order) {
      SmallVector<int64_t> offsets, sizes, aliases, gradients;
      bool anyAlias = false, anyGradient = false;
      for (Value result : op->getResults()) {
        Placement p = analysis->placement.lookup(result);
        bool planned = p.where == Placement::Where::Arena;
        offsets.push_back(planned ? arenaOffset[p.buffer] : -1);
        gradients.push_back(planned ? gradientOffset[p.buffer] : -1);
        sizes.push_back(planned ? analysis->buffers[p.buffer].interval.size
                                : 0);
        aliases.push_back(
            p.where == Placement::Where::Argument ? int64_t(p.argument) : -1);
        anyAlias |= p.where == Placement::Where::Argument;
        anyGradient |= gradients.back() >= 0;
      }
      bool stridedView = op->getNumResults() == 1 &&
                         analysis->stridedViews.count(op->getResult(0));
      plan::setPlacement(
          op,
          PlacementAttr::get(
              context, offsets, sizes,
              anyAlias ? ArrayRef<int64_t>(aliases) : ArrayRef<int64_t>(),
              anyGradient ? ArrayRef<int64_t>(gradients) : ArrayRef<int64_t>(),
              stridedView,
              op->getNumResults() > 0 && blocked.count(op->getResult(0))));
    }
    // One workspace serves every op that needs scratch (they run one at a
    // time): as large as the largest need.
    int64_t workspace = 0;
    for (Operation *op : analysis->order)
      workspace = std::max(workspace, workspaceBytes(op));
    // The CUDA backend's: cuBLASLt's and cuDNN's, and the partial sums.
    int64_t cudaWorkspace = workspace;
    for (Operation *op : analysis->order)
      cudaWorkspace = std::max(cudaWorkspace, cudaScratchBytes(op));
    placeArguments(func);
    plan::setStepPlan(
        func, StepPlanAttr::get(context, plan.arenaBytes, lowerBound(intervals),
                                naiveBytes(intervals), gradientBytes, workspace,
                                cudaWorkspace, plan.method, budgetDevice));
    return success();
  }
};
} // namespace
