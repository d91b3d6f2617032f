//===- Remat.cpp - Rematerialization under a memory budget ----------------===//
//
// See Passes.td (Remat). The search measures each candidate set with the
// real pipeline (schedule, fuse-elementwise, plan-memory on a copy of the
// module), because what recomputation saves depends on what the scheduler
// and the planner then do with the shortened lifetimes: an estimate would
// promise what the plan might not keep.
//
//===----------------------------------------------------------------------===//

#include "passes/MemoryReport.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"

#include "lang/MnemoOps.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"
#include "passes/BufferAnalysis.h"
#include "passes/Fusion.h"
#include "passes/RematMilp.h"
#include "passes/SourcePlace.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <optional>

namespace mnemo {
#define GEN_PASS_DEF_REMAT
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

/// Floating-point operations to compute `op` once: what the op declares
/// (RecomputeCostOpInterface, in its ODS entry); nothing for the rest.
int64_t flopsOf(Operation *op) {
  if (auto cost = llvm::dyn_cast<RecomputeCostOpInterface>(op))
    return cost.getRecomputeFlops();
  return 0;
}

/// The first result of an op that recomputes it alone
/// (FirstResultRecomputationOpInterface: a batch norm's output, from its
/// input and statistics).
FirstResultRecomputationOpInterface recomputedAlone(Value v) {
  auto result = llvm::dyn_cast<OpResult>(v);
  if (!result || result.getResultNumber() != 0)
    return {};
  return llvm::dyn_cast<FirstResultRecomputationOpInterface>(result.getOwner());
}

/// What recomputing `v` reads: its op's operands, or those of the op that
/// recomputes it alone (which may be the op's other results).
SmallVector<Value> recomputationOperands(Value v) {
  if (auto alone = recomputedAlone(v))
    return alone.getFirstResultRecomputationOperands();
  return SmallVector<Value>(v.getDefiningOp()->getOperands());
}

/// What recomputing `v` costs.
int64_t recomputationFlops(Value v) {
  if (auto alone = recomputedAlone(v))
    return alone.getFirstResultRecomputationFlops();
  return flopsOf(v.getDefiningOp());
}

/// The first op of the backward: the ops after the loss.
unsigned backwardStart(func::FuncOp train, ArrayRef<Operation *> ops) {
  auto ret =
      llvm::cast<func::ReturnOp>(train.getBody().front().getTerminator());
  for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
    if (model::resultName(train, r) == "loss")
      if (Operation *def = ret.getOperand(r).getDefiningOp())
        for (unsigned i = 0; i < ops.size(); ++i)
          if (ops[i] == def)
            return i + 1;
  }
  return ops.size();
}

/// A forward value the backward reads: recomputing it there frees its
/// bytes between the forward and the backward.
struct Candidate {
  Value value;
  int64_t bytes = 0;
};

struct RematPass : public mnemo::impl::RematBase<RematPass> {
  using RematBase::RematBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto train = module.lookupSymbol<func::FuncOp>("train_step");
    if (!train)
      return;
    limit = budget;
    if (limit == 0)
      if (DictionaryAttr settings = model::trainSettings(module))
        if (auto b = settings.getAs<IntegerAttr>("memory_budget"))
          limit = b.getInt();
    if (strategy != "none" && strategy != "auto" && strategy != "all" &&
        strategy != "sqrt" && strategy != "optimal") {
      module.emitError() << "unknown --remat=" << strategy
                         << " (none, all, sqrt, auto or optimal)";
      model::markUserError(getOperation());
      return signalPassFailure();
    }
    solver.clear();
    // The step before cheap recomputation, where a budget may need a
    // search without it.
    OwningOpRef<ModuleOp> withoutCheap;
    bool cheapApplied = false;
    FailureOr<int64_t> cheapFlops =
        recomputeCheapFirst(module, cheapApplied, withoutCheap);
    if (failed(cheapFlops))
      return signalPassFailure();
    // The model's own `checkpoint { ... }` blocks come next: what they
    // compute is recomputed, whatever the strategy, except their outputs.
    std::vector<Value> manual = checkpointRoots(train);
    // What is recomputed whatever the budget (cheap and checkpointed).
    alwaysFlops = *cheapFlops + (manual.empty() ? 0 : apply(train, manual));
    if ((cheapApplied || !manual.empty()) && limit <= 0 && strategy != "all" &&
        strategy != "sqrt")
      mark(module, train, 0);
    if (strategy == "all" || strategy == "sqrt") {
      if (failed(applyPolicy(module, train)))
        return signalPassFailure();
      return;
    }
    if (limit <= 0)
      return;

    // The searches compare quick plans with each other; whether the step
    // fits without recomputation, and the figure an error names, are the
    // emitted plan's.
    FailureOr<int64_t> none = plannedPeak(module, {});
    if (failed(none))
      return signalPassFailure();
    FailureOr<int64_t> noneEmitted = peakAgainst(module, {}, limit, *none);
    if (failed(noneEmitted))
      return signalPassFailure();
    if (*noneEmitted <= limit) {
      mark(module, train, 0);
      return;
    }
    if (strategy == "none") {
      budgetError(module) << "the memory budget of " << mib(limit) << onDevice()
                          << " cannot be met without recomputation (the plan "
                             "needs "
                          << mib(*noneEmitted) << "; --remat=auto recomputes)";
      model::markUserError(getOperation());
      return signalPassFailure();
    }
    std::optional<std::vector<Value>> chosen;
    int64_t smallest = *noneEmitted;
    if (failed(search(module, *none, chosen, smallest)))
      return signalPassFailure();
    if (chosen) {
      mark(module, train, apply(train, *chosen));
      return;
    }
    if (withoutCheap) {
      FailureOr<bool> fitted =
          searchWithoutCheap(module, withoutCheap.get(), smallest);
      if (failed(fitted))
        return signalPassFailure();
      if (*fitted)
        return;
    }
    budgetError(module) << "the memory budget of " << mib(limit) << onDevice()
                        << " cannot be met: the smallest planned peak found "
                           "is "
                        << mib(smallest)
                        << (cheapApplied ? " (recomputing only cheap ops "
                                         : " (without recomputation ")
                        << mib(*noneEmitted) << ")";
    model::markUserError(getOperation());
    return signalPassFailure();
  }

  /// This run's budget (0: none), what is recomputed whatever the budget,
  /// and how --remat=optimal's solver ended (set before the step is
  /// marked).
  int64_t limit = 0;
  int64_t alwaysFlops = 0;
  std::string solver;

  /// Records on `f` what was recomputed (`flops` beyond the ones recomputed
  /// whatever the budget) and the peak the choice was tuned for, planned
  /// as the pipeline's tail will plan it (the memory report and the
  /// emitted plan must agree).
  void mark(ModuleOp module, func::FuncOp f, int64_t flops) {
    int64_t ops = countRecomputed(f);
    int64_t peak = 0;
    if (limit > 0)
      if (FailureOr<int64_t> planned =
              plannedPeak(module, {}, PlannerEffort::Full);
          succeeded(planned))
        peak = *planned;
    plan::setRemat(f,
                   RematAttr::get(&getContext(), strategy, ops,
                                  flops + alwaysFlops, stepFlops(f),
                                  std::max<int64_t>(limit, 0), peak, solver));
  }

  /// Cheap recomputation comes first, budget or not: a value an
  /// elementwise or normalization op computes from values the backward
  /// keeps anyway is recomputed there instead of kept. auto and optimal
  /// only: none keeps everything, and the fixed policies (all, sqrt)
  /// recompute all but their boundaries themselves, which values already
  /// recomputed would hide from them. Its FLOPs; `applied` says whether it
  /// applied, and under a budget `withoutCheap` keeps the step as it was.
  FailureOr<int64_t> recomputeCheapFirst(ModuleOp module, bool &applied,
                                         OwningOpRef<ModuleOp> &withoutCheap) {
    if (!recomputeCheap || (strategy != "auto" && strategy != "optimal"))
      return 0;
    auto train = module.lookupSymbol<func::FuncOp>("train_step");
    std::vector<Value> cheap = cheapRoots(train);
    if (cheap.empty())
      return 0;
    FailureOr<int64_t> kept = plannedPeak(module, {});
    FailureOr<int64_t> recomputed = plannedPeak(module, cheap);
    if (failed(kept) || failed(recomputed))
      return failure();
    // All or nothing, as the real planner sees it: the scheduler may
    // order the backward so that a recomputation holds an operand
    // longer than the plan without it does.
    if (*recomputed >= *kept)
      return 0;
    if (limit > 0)
      withoutCheap = module.clone();
    applied = true;
    return apply(train, cheap);
  }

  /// Fixed policies, as people write torch.utils.checkpoint by hand: keep
  /// only each layer's (or repeat block's) outputs and recompute the rest
  /// (all), or keep them every sqrt(n) blocks (sqrt, Chen et al. 2016).
  LogicalResult applyPolicy(ModuleOp module, func::FuncOp train) {
    std::vector<Value> roots = policyRoots(train, strategy == "sqrt");
    if (limit > 0) {
      FailureOr<int64_t> quick = plannedPeak(module, roots);
      if (failed(quick))
        return failure();
      FailureOr<int64_t> peak = peakAgainst(module, roots, limit, *quick);
      if (failed(peak))
        return failure();
      if (*peak > limit) {
        budgetError(module)
            << "the memory budget of " << mib(limit) << onDevice()
            << " cannot be met with --remat=" << strategy << ": its plan needs "
            << mib(*peak) << " (--remat=auto searches for a plan that fits)";
        model::markUserError(getOperation());
        return failure();
      }
    }
    mark(module, train, apply(train, roots));
    return success();
  }

  /// The search for a set that fits: optimal's MILP (auto's search where
  /// it gives no choice that fits), or auto's searches. `chosen` stays
  /// empty where nothing fits, with the smallest peak in `smallest`.
  LogicalResult search(ModuleOp module, int64_t none,
                       std::optional<std::vector<Value>> &chosen,
                       int64_t &smallest) {
    auto train = module.lookupSymbol<func::FuncOp>("train_step");
    std::string how;
    if (strategy == "optimal") {
      if (failed(searchWithModel(module, limit, none, /*exact=*/true, chosen,
                                 smallest, how)))
        return failure();
      // Where the model missed what the pipeline does (or nothing fits),
      // auto's search decides instead, and the report says so.
      if (!chosen) {
        how = "auto's search: " +
              (how.empty()
                   ? std::string("the MILP's choices missed the budget in "
                                 "the real plan")
                   : how);
        if (failed(searchAuto(module, limit, none, chosen, smallest)))
          return failure();
      }
      solver = how;
      return success();
    }
    // auto: the planner-checked greedy and the pruned fixed policies, and
    // the greedy on the MILP's model; the cheapest set that fits.
    if (failed(searchAuto(module, limit, none, chosen, smallest)))
      return failure();
    std::optional<std::vector<Value>> modelChoice;
    if (failed(searchWithModel(module, limit, none, /*exact=*/false,
                               modelChoice, smallest, how)))
      return failure();
    Split split(train);
    if (modelChoice && (!chosen || recomputedFlops(split, *modelChoice) <
                                       recomputedFlops(split, *chosen)))
      chosen = modelChoice;
    return success();
  }

  /// Cheap recomputation first can cost a fit: the fixed policies' sets
  /// recompute more after it (examples/deep-mlp.mn: sqrt's set plans
  /// 21.25 MiB alone, 21.68 MiB after it, so auto missed a budget that
  /// --remat=sqrt meets). auto's search again, on `plain`, the step as it
  /// was; where a set fits, that step replaces `module`'s. True where it
  /// did.
  FailureOr<bool> searchWithoutCheap(ModuleOp module, ModuleOp plain,
                                     int64_t &smallest) {
    auto plainTrain = plain.lookupSymbol<func::FuncOp>("train_step");
    std::vector<Value> manual = checkpointRoots(plainTrain);
    int64_t manualFlops = manual.empty() ? 0 : apply(plainTrain, manual);
    FailureOr<int64_t> none = plannedPeak(plain, {});
    std::optional<std::vector<Value>> chosen;
    if (failed(none) ||
        failed(searchAuto(plain, limit, *none, chosen, smallest)))
      return failure();
    if (!chosen)
      return false;
    int64_t flops = apply(plainTrain, *chosen);
    auto train = module.lookupSymbol<func::FuncOp>("train_step");
    OpBuilder builder(train);
    auto searched = llvm::cast<func::FuncOp>(builder.clone(*plainTrain));
    train.erase();
    alwaysFlops = manualFlops;
    if (strategy == "optimal")
      solver += "; then auto's search without cheap recomputation";
    mark(module, searched, flops);
    return true;
  }

  /// `--remat=auto`: sets `result` to the cheapest fitting set found, or
  /// leaves it empty with the smallest peak found in `smallest`.
  LogicalResult searchAuto(ModuleOp module, int64_t limit, int64_t none,
                           std::optional<std::vector<Value>> &result,
                           int64_t &smallest) {
    auto train = module.lookupSymbol<func::FuncOp>("train_step");
    std::vector<Candidate> candidates = findCandidates(train);
    // Greedy, checked by the planner: among the values not yet chosen, the
    // one that frees the most bytes per recomputed FLOP (its chain priced
    // with what is already chosen: recomputing a value whose producer is
    // recomputed recomputes both) is tried; it stays if the planned peak
    // goes down. Until the plan fits the budget or nothing helps.
    // The scores change only when `chosen` does: between two values that
    // stay, the candidates are tried in one order, best first (the earlier
    // on ties), scored once.
    Split split(train);
    std::vector<Value> chosen;
    std::vector<bool> tried(candidates.size(), false);
    int64_t peak = none;
    bool kept;
    do {
      kept = false;
      int64_t base = recomputedFlops(split, chosen);
      std::vector<double> score(candidates.size());
      std::vector<size_t> order;
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (tried[i])
          continue;
        std::vector<Value> with = chosen;
        with.push_back(candidates[i].value);
        int64_t flops = recomputedFlops(split, with) - base;
        score[i] = double(candidates[i].bytes) / double(1 + flops);
        order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return score[a] > score[b]; });
      for (size_t best : order) {
        tried[best] = true;
        std::vector<Value> next = chosen;
        next.push_back(candidates[best].value);
        FailureOr<int64_t> p = plannedPeak(module, next);
        if (failed(p))
          return failure();
        if (*p < peak) {
          chosen = std::move(next);
          peak = *p;
          kept = true;
          break;
        }
      }
    } while (kept && peak > limit);
    // Each set that fits (the greedy's, and the fixed policies' sets) is
    // pruned: values are taken back out, the costliest first, while the
    // plan still fits. The search keeps the cheapest pruned set, and the
    // smallest peak for the error.
    auto cost = [&](ArrayRef<Value> roots) {
      return recomputedFlops(split, roots);
    };
    std::vector<std::vector<Value>> fitting;
    if (peak <= limit)
      fitting.push_back(chosen);
    std::vector<std::vector<Value>> sets = {chosen, policyRoots(train, false),
                                            policyRoots(train, true)};
    for (size_t k = 1; k < sets.size(); ++k) {
      FailureOr<int64_t> p = plannedPeak(module, sets[k]);
      if (failed(p))
        return failure();
      peak = std::min(peak, *p);
      if (*p <= limit)
        fitting.push_back(sets[k]);
    }
    // Where no set fits as the quick planner places it, the emitted plan's
    // full planner may fit one (it only improves on the quick placement):
    // each is planned so, and the smallest peak is the emitted plan's.
    if (fitting.empty()) {
      for (std::vector<Value> &roots : sets) {
        if (roots.empty()) // the plan without recomputation: it misses
          continue;
        FailureOr<int64_t> p = plannedPeak(module, roots, PlannerEffort::Full);
        if (failed(p))
          return failure();
        peak = std::min(peak, *p);
        if (*p <= limit)
          fitting.push_back(roots);
      }
    }
    std::optional<std::vector<Value>> best;
    for (std::vector<Value> &roots : fitting) {
      std::vector<Value> order = roots;
      std::stable_sort(order.begin(), order.end(), [&](Value a, Value b) {
        return flopsOf(a.getDefiningOp()) > flopsOf(b.getDefiningOp());
      });
      for (Value v : order) {
        std::vector<Value> without;
        for (Value r : roots)
          if (r != v)
            without.push_back(r);
        FailureOr<int64_t> q = plannedPeak(module, without);
        if (failed(q))
          return failure();
        if (*q <= limit)
          roots = std::move(without);
      }
      if (!best || cost(roots) < cost(*best))
        best = roots;
    }
    smallest = std::min(smallest, peak);
    result = best;
    return success();
  }

  /// The forward values of @train_step as the MILP sees them (RematMilp.h),
  /// with each one's value in `valueOf`. Times are op positions (the order
  /// in which the pass places recomputations); the bytes that
  /// recomputation does not change are the buffers BufferAnalysis finds
  /// after fusion (on a copy) that hold no forward value the MILP decides
  /// on. The scheduler reorders after remat, which the model does not see:
  /// solveOptimal checks every choice with the real pipeline.
  RematProblem buildProblem(ModuleOp module, std::vector<Value> &valueOf) {
    auto train = module.lookupSymbol<func::FuncOp>("train_step");
    Split split(train);
    RematProblem problem;
    problem.fixedBytes.assign(split.ops.size() + 1, 0);
    int returnAt = int(split.ops.size());
    // The copy: op i of the copy is op i here.
    OwningOpRef<ModuleOp> copy = module.clone();
    auto copyTrain = copy->lookupSymbol<func::FuncOp>("train_step");
    std::vector<Operation *> copyOps;
    for (Operation &op : copyTrain.getBody().front().without_terminator())
      copyOps.push_back(&op);
    PassManager pm(&getContext());
    pm.addPass(createFuseElementwise());
    FailureOr<BufferAnalysis> buffers = failure();
    if (succeeded(pm.run(*copy)))
      buffers = BufferAnalysis::analyze(copyTrain);
    auto timeOf = [&](Operation *op) {
      return llvm::isa<func::ReturnOp>(op) ? returnAt
                                           : int(split.index.lookup(op));
    };
    auto uses = [&](Value v, bool backward) {
      int first = -1, last = -1;
      for (Operation *user : v.getUsers()) {
        bool inBackward = llvm::isa<func::ReturnOp>(user) ||
                          split.index.lookup(user) >= split.start;
        if (inBackward != backward)
          continue;
        int at = timeOf(user);
        first = first < 0 ? at : std::min(first, at);
        last = std::max(last, at);
      }
      return std::make_pair(first, last);
    };
    auto copyOf = [&](Value v) {
      auto result = llvm::cast<OpResult>(v);
      return copyOps[split.index.lookup(result.getOwner())]->getResult(
          result.getResultNumber());
    };

    llvm::DenseMap<Value, int> valueIndex; // by the copy's values
    for (unsigned i = 0; i < split.start; ++i) {
      Operation *op = split.ops[i];
      if (llvm::isa<ConstantOp>(op))
        continue;
      for (Value result : op->getResults()) {
        auto [firstForward, lastForward] = uses(result, false);
        auto [firstBackward, lastBackward] = uses(result, true);
        bool readByBackward = firstBackward >= 0;
        // Values of multi-result ops the backward reads are kept (the pass
        // recomputes single values), and so are the step's results: their
        // buffers count as fixed.
        if (lastBackward == returnAt ||
            (readByBackward && op->getNumResults() != 1))
          continue;
        Value fused = copyOf(result);
        RematValue v;
        v.bytes = 0;
        if (succeeded(buffers)) {
          // Views and in-place results count their own bytes too: they
          // keep the buffer alive as long as they are, which matters
          // more to the choice than the overlap they double-count.
          Placement place = buffers->placement.lookup(fused);
          if (place.where == Placement::Where::Arena)
            v.bytes = storageBytes(result.getType());
        }
        v.flops = result == op->getResult(0) ? flopsOf(op) : 0;
        v.defined = timeOf(op);
        v.lastForwardUse = std::max(v.defined, lastForward);
        v.candidate = readByBackward;
        v.firstBackwardUse = firstBackward;
        v.lastBackwardUse = lastBackward;
        valueIndex[fused] = int(problem.values.size());
        problem.values.push_back(v);
        valueOf.push_back(result);
      }
    }
    for (size_t x = 0; x < problem.values.size(); ++x)
      for (Value operand : valueOf[x].getDefiningOp()->getOperands()) {
        if (!operand.getDefiningOp() ||
            !split.index.count(operand.getDefiningOp()))
          continue;
        auto it = valueIndex.find(copyOf(operand));
        if (it != valueIndex.end())
          problem.values[x].operands.push_back(it->second);
      }
    auto alive = [&](int64_t from, int64_t to, int64_t bytes) {
      for (int64_t t = std::max<int64_t>(from, 0);
           t <= std::min<int64_t>(to, returnAt); ++t)
        problem.fixedBytes[t] += bytes;
    };
    if (failed(buffers)) {
      // No plan to read (the planner will say why): every value alive
      // from its op to its last use.
      for (unsigned i = 0; i < split.ops.size(); ++i)
        for (Value result : split.ops[i]->getResults())
          if (!valueIndex.count(copyOf(result))) {
            auto [f, lastForward] = uses(result, false);
            auto [b, lastBackward] = uses(result, true);
            int at = timeOf(split.ops[i]);
            alive(at, std::max({at, lastForward, lastBackward}),
                  storageBytes(result.getType()));
          }
      return problem;
    }
    for (const ArenaBuffer &buffer : buffers->buffers) {
      // Parameter gradients have their own region (plan-memory), whose
      // bytes recomputation does not change.
      if (buffer.kind == BufferKind::Gradient)
        continue;
      // A buffer a decided value shares (in place) is fixed only after
      // the last use of the decided values in it.
      int64_t decidedUntil = -1;
      for (Value v : buffer.values) {
        auto it = valueIndex.find(v);
        if (it == valueIndex.end())
          continue;
        const RematValue &d = problem.values[it->second];
        decidedUntil = std::max<int64_t>(
            decidedUntil, std::max(d.lastForwardUse, d.lastBackwardUse));
      }
      alive(decidedUntil < 0 ? buffer.interval.start : decidedUntil + 1,
            buffer.interval.end, buffer.interval.size);
    }
    // Decided values alive at their forward and backward uses.
    for (const RematValue &v : problem.values) {
      alive(v.defined, v.lastForwardUse, v.bytes);
      if (v.candidate)
        alive(v.firstBackwardUse, v.lastBackwardUse, v.bytes);
    }
    return problem;
  }

  /// A search on the MILP's model (RematMilp.h) of the op order remat
  /// sees: exact (`--remat=optimal`, CBC) or greedy (part of `auto`), each
  /// choice checked by the real pipeline. The model does not see what the
  /// scheduler does after remat, so its capacity is the budget mapped
  /// linearly from the plan's range (nothing recomputed, to the lowest of
  /// the simple policies) onto the model's, and tightens by each miss
  /// until the plan fits or the model has nothing below. `result` stays
  /// empty then; `how` says how the search ended.
  LogicalResult searchWithModel(ModuleOp module, int64_t limit,
                                int64_t plannedNone, bool exact,
                                std::optional<std::vector<Value>> &result,
                                int64_t &smallest, std::string &how) {
    auto train = module.lookupSymbol<func::FuncOp>("train_step");
    std::vector<Value> valueOf;
    RematProblem problem = buildProblem(module, valueOf);
    // The lowest plan of the simple choices: every candidate recomputed
    // (each recomputation then rebuilds the forward below it), or the fixed
    // policies' sets.
    llvm::DenseMap<Value, int> indexOf;
    for (size_t x = 0; x < valueOf.size(); ++x)
      indexOf[valueOf[x]] = int(x);
    std::vector<Value> everything;
    for (size_t x = 0; x < valueOf.size(); ++x)
      if (problem.values[x].candidate)
        everything.push_back(valueOf[x]);
    std::vector<Value> lowestRoots;
    int64_t plannedLowest = INT64_MAX;
    for (std::vector<Value> roots :
         {everything, policyRoots(train, false), policyRoots(train, true)}) {
      FailureOr<int64_t> peak = plannedPeak(module, roots);
      if (failed(peak))
        return failure();
      if (*peak < plannedLowest) {
        plannedLowest = *peak;
        lowestRoots = std::move(roots);
      }
    }
    smallest = std::min(smallest, plannedLowest);
    std::vector<bool> nothing(problem.values.size(), false);
    std::vector<bool> lowest(problem.values.size(), false);
    for (Value v : lowestRoots)
      lowest[indexOf.lookup(v)] = true;
    int64_t modelNone = evaluateRemat(problem, nothing).peak();
    int64_t modelLowest = evaluateRemat(problem, lowest).peak();
    double perPlannedByte = plannedNone > plannedLowest
                                ? double(modelNone - modelLowest) /
                                      double(plannedNone - plannedLowest)
                                : 1.0;
    perPlannedByte = std::max(perPlannedByte, 0.05);
    problem.capacity =
        modelLowest + int64_t(double(limit - plannedLowest) * perPlannedByte);
    std::string error;
    std::optional<std::pair<int64_t, int64_t>> previous; // model, planned
    double solverSeconds = 0;
    for (int attempt = 1; attempt <= 12; ++attempt) {
      // The time limit is the whole search's, not each attempt's: a budget
      // the model keeps missing would otherwise cost up to 12 limits.
      double secondsLeft = timeLimit - solverSeconds;
      if (exact && secondsLeft < 0.05) {
        error = llvm::formatv("the MILP's choices missed the budget in the "
                              "real plan until the solver's time limit "
                              "({0:f0} s) ran out after {1} attempts",
                              double(timeLimit), attempt - 1)
                    .str();
        break;
      }
      RematSolution solution;
      bool solved = exact ? solveRematMilp(problem, secondsLeft, solution, error)
                          : greedyRemat(problem, solution);
      solverSeconds += solution.seconds;
      if (!solved) {
        if (exact)
          error = (attempt == 1 ? "the MILP gave no choice: "
                                : "the MILP's choices missed the budget in "
                                  "the real plan, then: ") +
                  error;
        break;
      }
      std::vector<Value> roots;
      for (size_t x = 0; x < valueOf.size(); ++x)
        if (solution.recompute[x])
          roots.push_back(valueOf[x]);
      FailureOr<int64_t> peak = plannedPeak(module, roots);
      if (failed(peak))
        return failure();
      if (*peak <= limit) {
        how = llvm::formatv(
            "{6}, {0} ({2} variables, {3} rows; {4} planner "
            "check{5}, {1:f1} s in the solver)",
            !exact                   ? std::string("no proof")
            : solution.provedOptimal ? std::string("proved optimal")
            : solution.gap >= 0
                ? llvm::formatv("best found within the time limit, "
                                "within {0:f1}% of the bound",
                                100 * solution.gap)
                      .str()
                : std::string("best found within the time limit"),
            solverSeconds, solution.variables, solution.constraints, attempt,
            attempt > 1 ? "s" : "",
            exact ? "CBC MILP" : "the greedy on the MILP's model");
        result = roots;
        return success();
      }
      // The next capacity excludes this choice, by the miss scaled with
      // how the model's peak and the plan's moved between the last two.
      if (previous && previous->first != solution.modelPeak &&
          previous->second != *peak)
        perPlannedByte =
            std::clamp(double(previous->first - solution.modelPeak) /
                           double(previous->second - *peak),
                       0.2, 5.0);
      previous = {solution.modelPeak, *peak};
      problem.capacity =
          std::min(problem.capacity, solution.modelPeak) -
          std::max<int64_t>(int64_t(double(*peak - limit) * perPlannedByte),
                            1024);
    }
    how = error;
    return success();
  }

  static int64_t countRecomputed(func::FuncOp f) {
    int64_t n = 0;
    f.walk([&](Operation *op) { n += plan::isRecomputed(op); });
    return n;
  }

  /// Exact bytes (a budget is given in bytes), with MiB to read them by:
  /// "34603008 bytes (33.00 MiB)".
  static std::string mib(int64_t bytes) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << bytes << (bytes == 1 ? " byte" : " bytes");
    if (bytes >= (1 << 20))
      os << llvm::format(" (%.2f MiB)", double(bytes) / (1 << 20));
    return os.str();
  }

  /// How a budget error names the device it is for.
  std::string onDevice() const {
    return budgetDevice == "cuda" ? " on a GPU (--device=cuda: the plan, the "
                                    "CUDA workspace and the executor's "
                                    "buffers)"
                                  : "";
  }
  /// Where a budget error points: --memory-budget when the option set it,
  /// else the model file (its train section's memory_budget).
  InFlightDiagnostic budgetError(ModuleOp module) {
    if (budget > 0)
      return emitError(NameLoc::get(
          StringAttr::get(module.getContext(), "--memory-budget")));
    return module.emitError();
  }

  static int64_t stepFlops(func::FuncOp f) {
    int64_t total = 0;
    f.walk([&](Operation *op) { total += flopsOf(op); });
    return total;
  }

  /// Forward values the backward reads (what a recomputation could free).
  std::vector<Candidate> findCandidates(func::FuncOp train) {
    Split split(train);
    std::vector<Candidate> result;
    for (unsigned i = 0; i < split.start; ++i) {
      Operation *op = split.ops[i];
      if (op->getNumResults() != 1 || llvm::isa<ConstantOp>(op) ||
          !split.readByBackward(op->getResult(0)) || split.readsOverwritten(op))
        continue;
      result.push_back(
          {op->getResult(0), storageBytes(op->getResult(0).getType())});
    }
    return result;
  }

  /// Values whose recomputation in the backward costs a pass over them and
  /// keeps nothing alive longer (torch.compile's min-cut partitioner makes
  /// the same trade for pointwise ops): the result of a pure op of at most
  /// kCheapFlopsPerElement FLOPs an element (elementwise ops, layer and RMS
  /// norms, softmax, a batch norm's output from its statistics; not
  /// products) whose every operand is a parameter, an input, a constant or
  /// a value the backward reads anyway at or after the result's first
  /// backward use. Keeping such a value costs its bytes from the forward to
  /// the backward; recomputing it, a pass. GPT-2 small: each block's GELU
  /// output (96 MiB in f32), recomputed from the input its gradient reads,
  /// and both layer norms' outputs, from the residual stream theirs read.
  /// ResNet-18: each batch norm + ReLU's output, from the convolution's
  /// output and the statistics the batch norm's gradient reads.
  std::vector<Value> cheapRoots(func::FuncOp train) {
    constexpr int64_t kCheapFlopsPerElement = 8;
    constexpr int kCheapChain = 3;
    constexpr int64_t kEarlyRecomputationOps = 8;
    // "Small": at most 1/64 of the value recomputed from it.
    constexpr int64_t kSmallOperandRatio = 64;
    auto numElements = [](Value v) {
      auto type = llvm::dyn_cast<ShapedType>(v.getType());
      return type && type.hasStaticShape() ? type.getNumElements()
                                           : int64_t(1) << 40;
    };
    Split split(train);
    // A value recomputed without its op's other results: a single-result
    // op's, or one its op recomputes alone (a batch norm's output).
    auto cheap = [&](Value v) {
      Operation *op = v.getDefiningOp();
      auto type = op && (op->getNumResults() == 1 || recomputedAlone(v))
                      ? llvm::dyn_cast<ShapedType>(v.getType())
                      : ShapedType();
      return type && isPure(op) && !llvm::isa<ConstantOp>(op) &&
             split.index.lookup(op) < split.start &&
             recomputationFlops(v) <=
                 kCheapFlopsPerElement * type.getNumElements();
    };
    auto backwardUses = [&](Value v) {
      int64_t first = -1, last = -1;
      for (Operation *user : v.getUsers()) {
        int64_t at = llvm::isa<func::ReturnOp>(user)
                         ? int64_t(split.ops.size())
                         : int64_t(split.index.lookup(user));
        if (at < int64_t(split.start))
          continue;
        first = first < 0 ? at : std::min(first, at);
        last = std::max(last, at);
      }
      return std::make_pair(first, last);
    };
    std::vector<Value> roots;
    // What is recomputed, and which of those from kept values alone.
    llvm::DenseSet<Value> chosen, leaves;
    for (unsigned i = 0; i < split.start; ++i) {
      Operation *op = split.ops[i];
      if (op->getNumResults() == 0 || !cheap(op->getResult(0)) ||
          plan::isRecomputed(op))
        continue;
      Value result = op->getResult(0);
      auto [first, last] = backwardUses(result);
      int64_t firstBackwardUse = first;
      // Read by the backward, not returned by the step.
      if (first < 0 || last == int64_t(split.ops.size()))
        continue;
      // An operand nothing in the backward reads is recomputed with the
      // value (apply's chain) when it is cheap in turn: a layer norm's
      // output cast to bf16 for the next product, from the residual
      // stream. Chains of at most kCheapChain ops.
      bool readsEarlyRecomputation = false;
      std::function<bool(Value, int)> available = [&](Value operand,
                                                      int depth) {
        Operation *def = operand.getDefiningOp();
        if (!def)
          return !split.overwritten.contains(operand);
        if (llvm::isa<ConstantOp>(def))
          return true;
        auto [operandFirst, operandLast] = backwardUses(operand);
        // A value recomputed itself serves once its own recomputation has
        // run, or a few ops earlier (SwiGLU's product of a SiLU, both
        // recomputed) if it is recomputed from kept values alone: chains
        // of recomputations pulled forward would recompute a residual
        // stream of cheap adds, each from the one before, all at the start
        // of the backward.
        if (chosen.contains(operand)) {
          if (operandLast < firstBackwardUse)
            return false;
          if (operandFirst <= firstBackwardUse)
            return true;
          readsEarlyRecomputation = true;
          // A small value recomputed from kept values alone (a layer
          // norm's scale cast to bf16, from its parameter) is pulled
          // forward as far as needed: holding it longer costs next to
          // nothing, where a chain of large ones would hold them all.
          if (!leaves.contains(operand))
            return false;
          return numElements(operand) * kSmallOperandRatio <=
                     numElements(result) ||
                 operandFirst - firstBackwardUse <= kEarlyRecomputationOps;
        }
        if (operandFirst >= 0)
          return operandLast >= firstBackwardUse;
        return depth > 1 && cheap(operand) &&
               llvm::all_of(recomputationOperands(operand),
                            [&](Value v) { return available(v, depth - 1); });
      };
      if (llvm::all_of(recomputationOperands(result),
                       [&](Value v) { return available(v, kCheapChain); })) {
        roots.push_back(result);
        chosen.insert(result);
        if (!readsEarlyRecomputation)
          leaves.insert(result);
      }
    }
    return roots;
  }

  /// The checkpoint unit of an op: its repeat block ("blocks.3" of
  /// "blocks.3.attn.wq") or its top-level layer ("fc1"); "" for the model's
  /// own ops.
  static std::string unitOf(Operation *op) {
    std::string layer = sourcePlaceOf(op->getLoc()).layer;
    SmallVector<StringRef> parts;
    StringRef(layer).split(parts, '.');
    if (parts.size() >= 2 && !parts[1].empty() &&
        llvm::all_of(parts[1], [](char c) { return llvm::isDigit(c); }))
      return (parts[0] + "." + parts[1]).str();
    return parts.empty() ? "" : parts[0].str();
  }

  /// The values `all` or `sqrt` recompute: every value the backward reads
  /// except the outputs of checkpoint units (values a later unit reads),
  /// and with `sqrt`, except only every ceil(sqrt(n))-th unit's outputs.
  std::vector<Value> policyRoots(func::FuncOp train, bool sqrtSegments) {
    Split split(train);
    std::vector<std::string> order; // units in forward order
    llvm::StringMap<unsigned> unitIndex;
    for (unsigned i = 0; i < split.start; ++i) {
      std::string u = unitOf(split.ops[i]);
      if (unitIndex.try_emplace(u, order.size()).second)
        order.push_back(u);
    }
    size_t segment =
        sqrtSegments ? size_t(std::ceil(std::sqrt(double(order.size())))) : 1;
    std::vector<Value> roots;
    for (const Candidate &c : findCandidates(train)) {
      Operation *def = c.value.getDefiningOp();
      unsigned unit = unitIndex.lookup(unitOf(def));
      bool boundary = llvm::any_of(c.value.getUsers(), [&](Operation *user) {
        unsigned at = split.index.lookup(user);
        return at < split.start && unitIndex.lookup(unitOf(user)) != unit;
      });
      // A kept boundary: every unit's with `all`, every segment's last
      // unit's with `sqrt`.
      bool kept =
          boundary && ((unit + 1) % segment == 0 || unit + 1 == order.size());
      if (!kept)
        roots.push_back(c.value);
    }
    return roots;
  }

  /// The values `checkpoint { ... }` blocks recompute: those computed inside
  /// a block that the backward reads, except the block's outputs (values a
  /// forward op outside the block reads).
  std::vector<Value> checkpointRoots(func::FuncOp train) {
    Split split(train);
    // MLIRGen marks them with a fused location whose metadata is the
    // block's number.
    auto blockOf = [](Operation *op) -> int64_t {
      int64_t block = -1;
      op->getLoc()->walk([&](Location l) {
        if (auto fused = llvm::dyn_cast<FusedLoc>(l))
          if (auto n = llvm::dyn_cast_or_null<IntegerAttr>(fused.getMetadata()))
            block = n.getInt();
        return WalkResult::advance();
      });
      return block;
    };
    std::vector<Value> roots;
    for (const Candidate &c : findCandidates(train)) {
      int64_t block = blockOf(c.value.getDefiningOp());
      if (block < 0)
        continue;
      bool output = llvm::any_of(c.value.getUsers(), [&](Operation *user) {
        return split.index.lookup(user) < split.start && blockOf(user) != block;
      });
      if (!output)
        roots.push_back(c.value);
    }
    return roots;
  }

  /// The forward and backward of a step function.
  struct Split {
    SmallVector<Operation *> ops;
    unsigned start;
    llvm::DenseMap<Operation *, unsigned> index;
    explicit Split(func::FuncOp train) {
      for (Operation &op : train.getBody().front().without_terminator())
        ops.push_back(&op);
      start = backwardStart(train, ops);
      for (unsigned i = 0; i < ops.size(); ++i)
        index[ops[i]] = i;
      Block &body = train.getBody().front();
      Operation *ret = body.getTerminator();
      for (unsigned r = 0; r < ret->getNumOperands(); ++r)
        if (std::optional<unsigned> arg = plan::reusedArgument(train, r)) {
          Operation *writer = ret->getOperand(r).getDefiningOp();
          if (writer && index.lookup(writer) < start)
            overwritten.insert(body.getArgument(*arg));
        }
    }
    bool readByBackward(Value v) const {
      return llvm::any_of(v.getUsers(), [&](Operation *user) {
        return index.lookup(user) >= start;
      });
    }
    /// Whether `op` reads an argument the forward overwrites in place (a
    /// buffer it updates, an LSTM's carried state): recomputed in the
    /// backward it would read the new value, so it is never recomputed.
    bool readsOverwritten(Operation *op) const {
      return llvm::any_of(op->getOperands(),
                          [&](Value v) { return overwritten.contains(v); });
    }
    llvm::DenseSet<Value> overwritten;
  };

  /// The values recomputing `roots` recomputes: each root and, back from
  /// it, every producer nothing keeps until the backward (a value the
  /// backward reads is kept unless it is itself a root).
  static llvm::SetVector<Value> chainOf(const Split &split,
                                        ArrayRef<Value> roots) {
    llvm::DenseSet<Value> rootSet(roots.begin(), roots.end());
    llvm::SetVector<Value> chain;
    SmallVector<Value> work(roots.begin(), roots.end());
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (!chain.insert(v))
        continue;
      for (Value operand : recomputationOperands(v)) {
        Operation *def = operand.getDefiningOp();
        bool kept =
            !def || llvm::isa<ConstantOp>(def) ||
            (split.readByBackward(operand) && !rootSet.contains(operand)) ||
            split.readsOverwritten(def);
        if (!kept)
          work.push_back(operand);
      }
    }
    return chain;
  }

  /// The FLOPs of recomputing `roots` with their chains.
  static int64_t recomputedFlops(const Split &split, ArrayRef<Value> roots) {
    int64_t flops = 0;
    for (Value c : chainOf(split, roots))
      flops += recomputationFlops(c);
    return flops;
  }

  /// Recomputes `roots` in the backward: each (with its chain, recursively)
  /// is cloned, with its location, right before its first backward user,
  /// and the backward reads the clone. Returns the recomputed FLOPs.
  int64_t apply(func::FuncOp train, ArrayRef<Value> roots) {
    Split split(train);
    llvm::SetVector<Value> chain = chainOf(split, roots);
    llvm::DenseSet<Value> read(roots.begin(), roots.end());
    llvm::DenseMap<Value, Value> clones;
    int64_t flops = 0;
    OpBuilder builder(&getContext());
    std::function<Value(Value, Operation *)> recompute =
        [&](Value v, Operation *before) -> Value {
      if (Value done = clones.lookup(v))
        return done;
      Operation *def = v.getDefiningOp();
      if (auto alone = recomputedAlone(v)) {
        SmallVector<Value> operands;
        for (Value operand : recomputationOperands(v))
          operands.push_back(
              chain.contains(operand) ? recompute(operand, before) : operand);
        builder.setInsertionPoint(before);
        Value result = alone.buildFirstResultRecomputation(builder, operands);
        plan::markRecomputed(result.getDefiningOp());
        flops += flopsOf(result.getDefiningOp());
        return clones[v] = result;
      }
      IRMapping map;
      for (Value operand : def->getOperands())
        if (chain.contains(operand))
          map.map(operand, recompute(operand, before));
      builder.setInsertionPoint(before);
      Operation *copy = builder.clone(*def, map);
      plan::markRecomputed(copy);
      flops += flopsOf(copy);
      // Every result of the copy stands in for the original's: another one
      // in the chain does not clone the op again.
      for (auto [original, copied] :
           llvm::zip(def->getResults(), copy->getResults()))
        clones.try_emplace(original, copied);
      return clones.lookup(v);
    };
    for (unsigned i = split.start; i < split.ops.size(); ++i)
      for (OpOperand &use : split.ops[i]->getOpOperands())
        if (read.contains(use.get()))
          use.set(recompute(use.get(), split.ops[i]));
    return flops;
  }

  /// The peak the real pipeline plans for @train_step with `roots`
  /// recomputed (on a copy; quick planner settings unless `effort` says).
  /// The planned peak of `roots` (`quick`: as the quick planner places
  /// them), measured against `limit` as the emitted plan will be: the quick
  /// planner's peak bounds the full planner's (which
  /// starts from the same placement and keeps only improvements), so it
  /// decides a fit alone; a miss is planned again in full, which fits some
  /// sets the quick planner misses (examples/gpt.mn's sqrt set at 1 layer,
  /// context 16, batch 2: 4178176 bytes quick, 4129024 in full).
  FailureOr<int64_t> peakAgainst(ModuleOp module, ArrayRef<Value> roots,
                                 int64_t limit, int64_t quick) {
    if (quick <= limit)
      return quick;
    return plannedPeak(module, roots, PlannerEffort::Full);
  }

  FailureOr<int64_t> plannedPeak(ModuleOp module, ArrayRef<Value> roots,
                                 PlannerEffort effort = PlannerEffort::Quick) {
    // The tail plans each step function on its own: the copy holds the
    // module's attributes and @train_step alone (examples/lstm.mn's
    // eval_step, 1,286 ops beside train_step's 3,630, was cloned, scheduled,
    // fused and planned in every trial).
    auto original = module.lookupSymbol<func::FuncOp>("train_step");
    OwningOpRef<ModuleOp> copy = ModuleOp::create(module.getLoc());
    (*copy)->setAttrs(module->getAttrDictionary());
    auto train = llvm::cast<func::FuncOp>(
        OpBuilder::atBlockEnd(copy->getBody()).clone(*original));
    // The roots live in the original: the same op, by position, in the copy.
    llvm::DenseMap<Operation *, Operation *> same;
    auto a = original.getBody().front().getOperations().begin();
    for (Operation &op : train.getBody().front()) {
      same[&*a] = &op;
      ++a;
    }
    std::vector<Value> mapped;
    for (Value v : roots)
      mapped.push_back(
          same.lookup(v.getDefiningOp())
              ->getResult(llvm::cast<OpResult>(v).getResultNumber()));
    apply(train, mapped);
    // The tail's passes are the emitted pipeline's, which verifies the
    // chosen step; a trial plan only needs its peak.
    PassManager pm(&getContext());
    pm.enableVerifier(false);
    PipelineOptions tail;
    tail.transientGradients = transientGradients;
    tail.budgetDevice = budgetDevice;
    tail.worldSize = worldSize;
    tail.shardOptimizer = shardOptimizer;
    buildPlanningPipeline(pm, tail, effort);
    if (failed(pm.run(*copy)))
      return failure();
    FailureOr<MemoryReport> report =
        buildMemoryReport(copy->lookupSymbol<func::FuncOp>("train_step"));
    if (failed(report))
      return failure();
    return report->peakBytes;
  }
};

} // namespace
