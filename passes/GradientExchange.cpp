//===- GradientExchange.cpp - Gradient buckets of a data-parallel step ----===//
//
// Where a data-parallel step sums its gradients over the ranks: contiguous
// buckets of the gradient region, each started as soon as the schedule has
// finished its gradients and awaited just before the first op that reads
// one (docs/distributed.md).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "lang/MnemoOps.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"

#include <map>

namespace mnemo {
#define GEN_PASS_DEF_PLANGRADIENTEXCHANGE
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

/// One parameter gradient's slot: where it lies, the ops (by position)
/// that write it and the first that reads it. The gradient is finished at
/// the last write before that read; writes after it (gradient clipping's
/// scaling, in place) work on the sum, the same on every rank.
struct GradientSlot {
  int64_t offset = 0, bytes = 0;
  std::vector<unsigned> writes;
  unsigned firstRead = ~0u;
  Operation *firstWriter = nullptr;
};

struct PlanGradientExchangePass
    : public mnemo::impl::PlanGradientExchangeBase<PlanGradientExchangePass> {
  using PlanGradientExchangeBase::PlanGradientExchangeBase;

  void runOnOperation() override {
    if (worldSize < 1)
      return;
    func::FuncOp train =
        getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!train)
      return;
    if (failed(plan(train)))
      signalPassFailure();
  }

  LogicalResult plan(func::FuncOp func) {
    if (failed(plan::checkPlanned(func)))
      return failure();
    if (plan::stepPlan(func).getGradientBytes() == 0)
      return func.emitError()
             << "data parallelism (world size " << worldSize
             << ") sums the gradients in their own region: the step has none "
                "there (--transient-gradients plans them in the arena; "
                "leave it out)";
    Block &body = func.getBody().front();
    std::vector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    llvm::DenseMap<Operation *, unsigned> position;
    for (auto [i, op] : llvm::enumerate(ops))
      position[op] = i;

    // Every value placed in the gradient region, by its slot's offset.
    std::map<int64_t, GradientSlot> slots;
    llvm::DenseMap<Value, int64_t> slotOf;
    for (Operation *op : ops) {
      PlacementAttr placed = plan::placement(op);
      if (!placed || placed.getGradientOffsets().empty())
        continue;
      for (auto [i, offset] : llvm::enumerate(placed.getGradientOffsets())) {
        if (offset < 0)
          continue;
        Value v = op->getResult(i);
        if (!llvm::cast<ShapedType>(v.getType()).getElementType().isF32())
          return op->emitError()
                 << "data parallelism sums f32 gradients; this one is "
                 << v.getType();
        GradientSlot &slot = slots[offset];
        slot.offset = offset;
        slot.bytes = std::max(slot.bytes, placed.getSizes()[i]);
        slot.writes.push_back(position[op]);
        if (!slot.firstWriter)
          slot.firstWriter = op;
        slotOf[v] = offset;
      }
    }
    // A read is a use by an op that does not itself write the slot (an
    // accumulation into it is part of the gradient's computation).
    for (auto [value, offset] : slotOf)
      for (Operation *user : value.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (!top)
          continue;
        PlacementAttr placed = plan::placement(top);
        bool writesSlot =
            placed && llvm::is_contained(placed.getGradientOffsets(), offset);
        if (!writesSlot)
          slots[offset].firstRead =
              std::min(slots[offset].firstRead, position[top]);
      }
    unsigned end = position[body.getTerminator()];
    std::map<int64_t, unsigned> finished;
    for (auto &[offset, slot] : slots) {
      slot.firstRead = std::min(slot.firstRead, end);
      if (slot.writes.front() >= slot.firstRead)
        return slot.firstWriter->emitError()
               << "internal error: a gradient is read before it is written, "
                  "so it cannot be summed over the ranks";
      unsigned last = 0;
      for (unsigned w : slot.writes)
        if (w < slot.firstRead)
          last = std::max(last, w);
      finished[offset] = last;
    }

    // Buckets in the region's order (the order the gradients are finished,
    // when plan-memory laid them out by readiness): a gradient joins the
    // bucket before it unless that would take it past `bucket-bytes` (a
    // larger gradient is a bucket of its own, as in PyTorch's DDP) or make
    // the bucket needed before all of it is finished.
    struct Bucket {
      int64_t offset, bytes;
      unsigned ready, needed;
    };
    std::vector<Bucket> buckets;
    for (auto &[offset, slot] : slots) {
      if (!buckets.empty()) {
        Bucket &last = buckets.back();
        unsigned ready = std::max(last.ready, finished[offset]);
        unsigned needed = std::min(last.needed, slot.firstRead);
        int64_t bytes = slot.offset + slot.bytes - last.offset;
        if (bytes <= bucketBytes && ready < needed) {
          last.bytes = bytes;
          last.ready = ready;
          last.needed = needed;
          continue;
        }
      }
      buckets.push_back(
          {slot.offset, slot.bytes, finished[offset], slot.firstRead});
    }

    MLIRContext *context = func.getContext();
    int64_t shardBytes = 0, stateTensors = 0;
    if (shardOptimizer &&
        failed(shardState(func, ops, shardBytes, stateTensors)))
      return failure();
    SmallVector<int64_t> offsets, sizes;
    std::vector<SmallVector<int64_t>> ready(ops.size()), await(ops.size());
    for (auto [k, b] : llvm::enumerate(buckets)) {
      offsets.push_back(b.offset);
      sizes.push_back(b.bytes);
      ready[b.ready].push_back(k);
      await[b.needed].push_back(k);
    }
    plan::setGradientBuckets(
        func, GradientBucketsAttr::get(context, worldSize, offsets, sizes,
                                       shardBytes, stateTensors));
    for (auto [i, op] : llvm::enumerate(ops))
      if (!ready[i].empty() || !await[i].empty())
        plan::setGradientSync(
            op, GradientSyncAttr::get(context, ready[i], await[i]));
    return success();
  }

  /// ZeRO-1: the ranks' parts of the gradient region and the optimizer
  /// state's slots in the full layout (each rank allocates its parts).
  LogicalResult shardState(func::FuncOp func, ArrayRef<Operation *> ops,
                           int64_t &shardBytes, int64_t &stateTensors) {
    StepPlanAttr stepPlan = plan::stepPlan(func);
    int64_t gradientBytes = stepPlan.getGradientBytes();
    shardBytes = llvm::alignTo(llvm::divideCeil(gradientBytes, worldSize), 64);
    int64_t padded = shardBytes * worldSize;
    SmallVector<SlotAttr> slots;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      slots.push_back(plan::slot(func, i));
    llvm::DenseSet<unsigned> sharded;
    for (Operation *op : ops) {
      // Errors about the train section, at the model (the updates carry
      // their parameters' locations, in the std library's layers).
      if (llvm::isa<Adam8bitUpdateOp>(op))
        return func.emitError()
               << "--shard-optimizer: adamw8bit's block-quantized moments "
                  "are not sharded yet; use adamw, adam or sgd";
      SmallVector<Value> states;
      Value grad, skip;
      if (auto adam = llvm::dyn_cast<AdamUpdateOp>(op)) {
        states = {adam.getExpAvg(), adam.getExpAvgSq()};
        grad = adam.getGrad();
        skip = adam.getSkip();
      } else if (auto sgd = llvm::dyn_cast<SgdUpdateOp>(op)) {
        states = {sgd.getMomentumBuffer()};
        grad = sgd.getGrad();
        skip = sgd.getSkip();
      } else {
        continue;
      }
      if (skip)
        return func.emitError()
               << "--shard-optimizer: f16 loss scaling decides on every "
                  "rank whether a step's gradients overflowed, which needs "
                  "them all; train in bf16 or f32";
      int64_t gradientOffset = -1;
      if (auto result = llvm::dyn_cast<OpResult>(grad))
        if (PlacementAttr placed = plan::placement(result.getOwner());
            placed && !placed.getGradientOffsets().empty())
          gradientOffset =
              placed.getGradientOffsets()[result.getResultNumber()];
      if (gradientOffset < 0)
        return op->emitError() << "internal error: an update whose gradient "
                                  "is not in the gradient region";
      for (auto [t, state] : llvm::enumerate(states)) {
        auto arg = llvm::dyn_cast<BlockArgument>(state);
        if (!arg || model::argumentRole(func, arg.getArgNumber()) !=
                        ArgumentRole::OptState)
          return op->emitError() << "internal error: an optimizer state that "
                                    "is not a step argument";
        slots[arg.getArgNumber()] =
            SlotAttr::get(func.getContext(), MemoryRegion::OptimizerState,
                          int64_t(t) * padded + gradientOffset);
        sharded.insert(arg.getArgNumber());
      }
      stateTensors = std::max<int64_t>(stateTensors, states.size());
    }
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (model::argumentRole(func, i) == ArgumentRole::OptState &&
          !sharded.count(i))
        return func.emitError()
               << "--shard-optimizer shards the optimizer's per-element "
                  "state; '"
               << model::argumentName(func, i)
               << "' is not one (pruning masks and f16's loss scale are "
                  "not sharded)";
    plan::setSlots(func, slots);
    // The gradient region, padded to whole parts: reduce-scatter and
    // all-gather move equal parts.
    plan::setStepPlan(
        func,
        StepPlanAttr::get(
            func.getContext(), stepPlan.getArenaBytes(),
            stepPlan.getLowerBoundBytes(), stepPlan.getNaiveBytes(), padded,
            stepPlan.getWorkspaceBytes(), stepPlan.getCudaWorkspaceBytes(),
            stepPlan.getPlanner(), stepPlan.getBudgetDevice()));
    return success();
  }
};

} // namespace
