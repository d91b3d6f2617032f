//===- MemoryReport.cpp - Where every byte of a step goes -----------------===//

#include "passes/MemoryReport.h"
#include "lang/MnemoOps.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"
#include "passes/BufferAnalysis.h"
#include "passes/SourcePlace.h"
#include "runtime/Overhead.h"
#include "runtime/cuda/DeviceLayout.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <map>
#include <set>

using namespace mlir;
using namespace mnemo;

std::string mnemo::formatBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0)
    std::snprintf(text, sizeof text, "%lld B", (long long)bytes);
  else
    std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  return text;
}

namespace {

/// Where an op came from: its layer ("h.3.attn") and "file:line:col" ("" for
/// an op without a place in the model file).
void placeOf(Operation *op, std::string &layer, std::string &location) {
  SourcePlace place = sourcePlaceOf(op->getLoc());
  layer = place.layer;
  if (!place.file.empty())
    location = place.file + ":" + std::to_string(place.line) + ":" +
               std::to_string(place.column);
}

/// The regions the step's arguments live in (parameters, buffers, the
/// optimizer state with the pruning masks, the batch), the plan's regions
/// and peaks, and under data parallelism the gradient buckets and ZeRO-1's
/// share of the state.
void readRegions(func::FuncOp func, MemoryReport &r) {
  StepPlanAttr stepPlan = plan::stepPlan(func); // analyzePlanned checked it
  r.arenaBytes = stepPlan.getArenaBytes();
  r.workspaceBytes = stepPlan.getWorkspaceBytes();
  r.lowerBoundBytes = stepPlan.getLowerBoundBytes();
  r.naiveBytes = stepPlan.getNaiveBytes();
  r.planner = stepPlan.getPlanner().str();
  if (std::optional<int64_t> dense = model::denseWeightBytes(func))
    r.trainedParameterBytes = *dense;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    std::optional<ArgumentRole> role = model::argumentRole(func, i);
    int64_t bytes = storageBytes(func.getArgumentTypes()[i]);
    if (role == ArgumentRole::Param)
      r.parameterBytes += bytes;
    else if (role == ArgumentRole::Buffer)
      r.bufferBytes += bytes;
    else if (role == ArgumentRole::OptState) {
      r.optimizerStateBytes += bytes;
      StringRef name = model::argumentName(func, i);
      if (name.ends_with(".mask")) {
        r.pruneMaskBytes += bytes;
        StringRef weight = name.drop_back(strlen(".mask"));
        for (unsigned j = 0; j < func.getNumArguments(); ++j) {
          if (model::argumentName(func, j) == weight)
            r.maskedElements +=
                llvm::cast<ShapedType>(func.getArgumentTypes()[j])
                    .getNumElements();
        }
      }
    } else
      r.inputBytes += bytes;
  }
  r.gradientRegionBytes = stepPlan.getGradientBytes();
  if (GradientBucketsAttr buckets = plan::gradientBuckets(func)) {
    r.worldSize = buckets.getWorldSize();
    r.gradientBuckets.assign(buckets.getSizes().begin(),
                             buckets.getSizes().end());
    // ZeRO-1: each rank keeps its parts of the optimizer state.
    if (buckets.getShardBytes()) {
      r.unshardedStateBytes = r.optimizerStateBytes;
      r.optimizerStateBytes =
          buckets.getStateTensors() * buckets.getShardBytes();
    }
  }
  r.cpuPeakBytes = r.arenaBytes + r.parameterBytes + r.bufferBytes +
                   r.gradientRegionBytes + r.optimizerStateBytes +
                   r.inputBytes + r.workspaceBytes;
  r.cudaWorkspaceBytes = stepPlan.getCudaWorkspaceBytes();
  r.cudaPeakBytes = cuda::deviceAllocationBytes(
      r.parameterBytes, r.gradientRegionBytes, r.optimizerStateBytes,
      r.inputBytes, r.arenaBytes, r.cudaWorkspaceBytes, r.bufferBytes);
  r.budgetDevice = stepPlan.getBudgetDevice().str();
  r.peakBytes = r.budgetDevice == "cuda" ? r.cudaPeakBytes : r.cpuPeakBytes;
  // The largest operand a GEMM packs (OpenBLAS's buffer, runtime/Overhead.h).
  int64_t largestGemmOperand = 0;
  func.walk([&](Operation *op) {
    if (!llvm::isa<MatmulOp, BatchMatmulOp>(op))
      return;
    for (Value operand : op->getOperands())
      largestGemmOperand =
          std::max(largestGemmOperand, storageBytes(operand.getType()));
  });
  r.trainerOverheadBytes =
      runtime::cpuTrainerOverheadBytes(r.inputBytes, largestGemmOperand);
}

/// What remat chose: the budget, and the recomputed ops by kind, the most
/// first.
void readRecomputation(func::FuncOp func, MemoryReport &r) {
  if (RematAttr remat = plan::remat(func)) {
    r.budgetBytes = remat.getMemoryBudget();
    r.recomputedOps = remat.getRecomputedOps();
    r.recomputedFlops = remat.getRecomputedFlops();
    r.stepFlops = remat.getStepFlops();
    r.rematPeakBytes = remat.getPeakBytes();
    r.rematSolver = remat.getSolver().str();
  }
  std::map<std::string, int64_t> kinds;
  func.walk([&](Operation *op) {
    if (plan::isRecomputed(op))
      ++kinds[op->getName().getStringRef().str()];
  });
  r.recomputed.assign(kinds.begin(), kinds.end());
  std::stable_sort(
      r.recomputed.begin(), r.recomputed.end(),
      [](const auto &a, const auto &b) { return a.second > b.second; });
}

/// The fused ops (attention, the classifier's loss) with what they keep
/// against what the unfused graph would, and the values kept in channel
/// blocks.
void readFusedOps(func::FuncOp func, MemoryReport &r) {
  func.walk([&](Operation *op) {
    if (op->getNumResults() == 0 || !plan::isChannelBlocked(op->getResult(0)))
      return;
    if (plan::arenaOffset(op, 0) >= 0) // not computed in a consumer's loop
      ++r.channelBlockedValues;
  });
  func.walk([&](AttentionOp op) {
    MemoryReport::Attention entry;
    placeOf(op, entry.layer, entry.location);
    entry.type = tensorTypeString(op.getResult().getType());
    entry.rewritten = plan::isRewrittenAttention(op);
    entry.savedBytes = storageBytes(op.getResult().getType()) +
                       storageBytes(op.getLogSumExp().getType());
    auto q = llvm::cast<ShapedType>(op.getQuery().getType());
    auto k = llvm::cast<ShapedType>(op.getKey().getType());
    entry.probabilityBytes = q.getNumElements() / q.getShape().back() *
                             k.getShape()[k.getRank() - 2] *
                             ((q.getElementTypeBitWidth() + 7) / 8);
    r.attention.push_back(entry);
  });
  auto classifier = [&](auto op) {
    MemoryReport::Classifier entry;
    placeOf(op, entry.layer, entry.location);
    auto hidden = llvm::cast<ShapedType>(op.getHidden().getType());
    auto weight = llvm::cast<ShapedType>(op.getWeight().getType());
    entry.rows = hidden.getNumElements() / hidden.getShape().back();
    entry.classes = weight.getShape()[op.getTransposeWeight() ? 0 : 1];
    entry.chunkRows = std::min<int64_t>(op.getChunkRows(), entry.rows);
    // The kernels hold a chunk's logits in f32 (their gradient in place).
    entry.chunkBytes = entry.chunkRows * entry.classes * 4;
    entry.logitsBytes = entry.rows * entry.classes *
                        ((hidden.getElementTypeBitWidth() + 7) / 8);
    return entry;
  };
  func.walk([&](Operation *op) {
    if (auto loss = llvm::dyn_cast<LinearCrossEntropyOp>(op)) {
      MemoryReport::Classifier entry = classifier(loss);
      entry.gradient = llvm::any_of(loss.getLogSumExp().getUsers(),
                                    llvm::IsaPred<LinearCrossEntropyGradOp>);
      entry.accuracy = bool(loss.getAccuracy());
      r.classifiers.push_back(entry);
    } else if (auto loss = llvm::dyn_cast<LinearCrossEntropyWithGradOp>(op)) {
      MemoryReport::Classifier entry = classifier(loss);
      entry.gradient = entry.gradientWithLoss = true;
      r.classifiers.push_back(entry);
    }
  });
}

/// The step with the most arena bytes live, and what is live then, the
/// largest first, summed by kind.
std::vector<const ArenaBuffer *> buffersAtPeak(const BufferAnalysis &analysis,
                                               MemoryReport &r) {
  // Buffers in the arena (gradients may have their own region).
  auto inArena = [](const ArenaBuffer &b) {
    auto result = llvm::cast<OpResult>(b.root);
    return plan::arenaOffset(result.getOwner(), result.getResultNumber()) >= 0;
  };
  std::vector<int64_t> live(r.steps + 1, 0);
  for (const ArenaBuffer &b : analysis.buffers)
    if (inArena(b))
      for (int64_t s = b.interval.start; s <= b.interval.end && s <= r.steps;
           ++s)
        live[s] += b.interval.size;
  r.peakStep = std::max_element(live.begin(), live.end()) - live.begin();
  std::vector<const ArenaBuffer *> atPeak;
  for (const ArenaBuffer &b : analysis.buffers) {
    if (!inArena(b) || b.interval.start > r.peakStep ||
        b.interval.end < r.peakStep)
      continue;
    atPeak.push_back(&b);
    int64_t &bucket = b.kind == BufferKind::Gradient     ? r.gradientBytes
                      : b.kind == BufferKind::Activation ? r.activationBytes
                                                         : r.temporaryBytes;
    bucket += b.interval.size;
  }
  std::stable_sort(atPeak.begin(), atPeak.end(),
                   [](const ArenaBuffer *a, const ArenaBuffer *b) {
                     return a->interval.size > b->interval.size;
                   });
  return atPeak;
}

/// Why the amp policy left an activation in f32.
std::string keptF32Reason(Value value) {
  Operation *def = value.getDefiningOp();
  // The classifier loss with its gradient follows its operands (it is made
  // after mixed precision), but its loss is the fused loss's, f32.
  bool statistics =
      (def->hasTrait<AmpStatisticsStayF32>() && value != def->getResult(0)) ||
      def->hasTrait<AmpResultsStayF32>() ||
      (llvm::isa<LinearCrossEntropyWithGradOp>(def) &&
       value == def->getResult(0));
  if (statistics)
    return "a loss or statistics, f32 whatever the op computes in";
  if (llvm::isa<CastOp>(def))
    return "cast up for an op that computes in f32";
  if (def->hasTrait<AmpF32>())
    return "computes in f32 (a reduction, exponential or normalization)";
  return "follows an f32 operand";
}

/// Under mixed precision: which activations at the peak stay f32, and why
/// (the amp policy's category of the op that made them).
void readKeptF32(func::FuncOp func,
                 const std::vector<const ArenaBuffer *> &atPeak,
                 MemoryReport &r) {
  func.walk([&](Operation *op) {
    for (Type t : op->getResultTypes())
      if (auto shaped = llvm::dyn_cast<ShapedType>(t);
          shaped &&
          (shaped.getElementType().isBF16() || shaped.getElementType().isF16()))
        r.mixedPrecision = true;
  });
  if (!r.mixedPrecision)
    return;
  std::map<std::pair<std::string, std::string>, MemoryReport::KeptF32> kept;
  // An entry counts ops, not buffers: a loss with its accuracy is one op.
  std::set<Operation *> counted;
  for (const ArenaBuffer *b : atPeak) {
    auto type = llvm::dyn_cast<ShapedType>(b->root.getType());
    if (b->kind != BufferKind::Activation || !type ||
        !type.getElementType().isF32())
      continue;
    std::string op = b->root.getDefiningOp()->getName().getStringRef().str();
    std::string why = keptF32Reason(b->root);
    MemoryReport::KeptF32 &entry = kept[{op, why}];
    entry.op = op;
    entry.why = why;
    entry.bytes += b->interval.size;
    if (counted.insert(b->root.getDefiningOp()).second)
      ++entry.count;
    r.f32ActivationBytes += b->interval.size;
  }
  for (auto &[key, entry] : kept)
    r.keptF32.push_back(entry);
  std::stable_sort(
      r.keptF32.begin(), r.keptF32.end(),
      [](const auto &a, const auto &b) { return a.bytes > b.bytes; });
}

} // namespace

FailureOr<MemoryReport> mnemo::buildMemoryReport(func::FuncOp func) {
  FailureOr<BufferAnalysis> analysis = BufferAnalysis::analyzePlanned(func);
  if (failed(analysis))
    return failure();
  MemoryReport r;
  r.function = func.getName().str();
  r.steps = analysis->order.size();
  readRegions(func, r);
  readRecomputation(func, r);
  readFusedOps(func, r);
  std::vector<const ArenaBuffer *> atPeak = buffersAtPeak(*analysis, r);
  readKeptF32(func, atPeak, r);
  // The ten largest buffers live at the peak.
  for (const ArenaBuffer *b : atPeak) {
    if (r.largestAtPeak.size() == 10)
      break;
    MemoryReport::Buffer entry;
    Operation *def = b->root.getDefiningOp();
    placeOf(def, entry.layer, entry.location);
    entry.op = def->getName().getStringRef().str();
    entry.type = tensorTypeString(b->root.getType());
    entry.kind = spell(b->kind);
    entry.bytes = b->interval.size;
    r.largestAtPeak.push_back(entry);
  }
  return r;
}

namespace {
/// One row of the report: what, its bytes, and a note.
void line(llvm::raw_ostream &os, const char *what, int64_t bytes,
          const std::string &note = "") {
  os << "  " << llvm::left_justify(what, 28)
     << llvm::right_justify(formatBytes(bytes), 12)
     << (note.empty() ? "" : "   " + note) << "\n";
}

/// The plan's regions, the arena's make-up, the peaks and the budget.
void printRegions(const MemoryReport &r, llvm::raw_ostream &os) {
  line(os, "parameters", r.parameterBytes);
  if (r.trainedParameterBytes)
    line(os, "  as trained (f32)", r.trainedParameterBytes,
         llvm::formatv("compressed {0:f2}x smaller",
                       double(r.trainedParameterBytes) /
                           double(std::max<int64_t>(r.parameterBytes, 1)))
             .str());
  if (r.bufferBytes)
    line(os, "buffers", r.bufferBytes);
  if (r.gradientRegionBytes)
    line(os, "gradients", r.gradientRegionBytes);
  line(os, "optimizer state", r.optimizerStateBytes,
       r.unshardedStateBytes
           ? llvm::formatv("this rank's part (ZeRO-1) of {0} over {1} "
                           "rank{2}",
                           formatBytes(r.unshardedStateBytes), r.worldSize,
                           r.worldSize == 1 ? "" : "s")
                 .str()
           : std::string());
  if (r.pruneMaskBytes)
    line(
        os, "  pruning masks", r.pruneMaskBytes,
        llvm::formatv("1 bit for each of {0} weights", r.maskedElements).str());
  line(os, "inputs (one batch)", r.inputBytes);
  line(os, "arena", r.arenaBytes, "planned by " + r.planner);
  line(os, "  lower bound", r.lowerBoundBytes,
       llvm::formatv("arena / lower bound = {0:f3}",
                     r.lowerBoundBytes
                         ? double(r.arenaBytes) / double(r.lowerBoundBytes)
                         : 1.0)
           .str());
  line(os, "  without reuse", r.naiveBytes,
       llvm::formatv("arena / without reuse = {0:f3}",
                     r.naiveBytes ? double(r.arenaBytes) / double(r.naiveBytes)
                                  : 1.0)
           .str());
  line(os, "  activations at the peak", r.activationBytes);
  if (!r.gradientRegionBytes)
    line(os, "  gradients at the peak", r.gradientBytes);
  line(os, "  temporaries at the peak", r.temporaryBytes);
  line(os, "workspace", r.workspaceBytes);
  line(os, "peak (one step needs)", r.cpuPeakBytes,
       r.budgetDevice == "cpu" ? "" : "on the CPU (not budgeted)");
  line(os, "peak on a GPU", r.cudaPeakBytes,
       llvm::formatv(
           "one cudaMalloc: CUDA workspace {0} (for the CPU's "
           "{1}), second batch, control{2}",
           formatBytes(r.cudaWorkspaceBytes), formatBytes(r.workspaceBytes),
           r.budgetDevice == "cuda" ? "; budgeted (--device=cuda)" : "")
           .str());
  if (r.budgetBytes) {
    line(os, "  memory budget", r.budgetBytes,
         r.recomputedOps == 0
             ? std::string("met without recomputation")
             : llvm::formatv("met by recomputing {0} ops in the backward, "
                             "+{1:f1}% FLOPs",
                             r.recomputedOps,
                             r.stepFlops
                                 ? 100.0 * double(r.recomputedFlops) /
                                       double(r.stepFlops - r.recomputedFlops)
                                 : 0.0)
                   .str());
  }
}

/// What the backward recomputes, who chose it, and the CPU's layout.
void printRecomputation(const MemoryReport &r, llvm::raw_ostream &os) {
  if (!r.recomputed.empty()) {
    std::string list;
    for (const auto &[op, count] : r.recomputed)
      list += (list.empty() ? "" : ", ") + op + " x" + std::to_string(count);
    os << "  recomputed in the backward: " << list;
    if (r.stepFlops > r.recomputedFlops)
      os << llvm::formatv(" (+{0:f1}% FLOPs)",
                          100.0 * double(r.recomputedFlops) /
                              double(r.stepFlops - r.recomputedFlops));
    os << "\n";
  }
  if (!r.rematSolver.empty())
    os << "  chosen by " << r.rematSolver << "\n";
  if (r.channelBlockedValues)
    os << "  CPU layout: " << r.channelBlockedValues
       << " activations in blocks of channels, which the convolutions read "
          "and write without reorders\n";
}

/// What each rank sends and receives per step under data parallelism.
void printDataParallel(const MemoryReport &r, llvm::raw_ostream &os) {
  if (r.gradientBuckets.empty())
    return;
  // A ring all-reduce (Open MPI's and NCCL's for large buckets) sends
  // and receives 2 (N - 1) / N of the summed bytes on each rank.
  int64_t summed = 0;
  for (int64_t b : r.gradientBuckets)
    summed += b;
  int64_t n = r.worldSize;
  line(os, "data parallel, each rank", summed,
       r.unshardedStateBytes
           ? llvm::formatv(
                 "of gradients reduce-scattered over {0} rank{5} in {1} "
                 "bucket{2} and {3} of parameters all-gathered per step (a "
                 "ring sends {4} and receives as much per rank)",
                 n, r.gradientBuckets.size(),
                 r.gradientBuckets.size() == 1 ? "" : "s",
                 formatBytes(r.gradientRegionBytes),
                 formatBytes((n - 1) * (summed + r.gradientRegionBytes) / n),
                 n == 1 ? "" : "s")
                 .str()
           : llvm::formatv(
                 "of gradients summed over {0} rank{4} in {1} bucket{2} "
                 "per step (a ring all-reduce sends {3} and receives as "
                 "much per rank); every rank holds the whole plan",
                 n, r.gradientBuckets.size(),
                 r.gradientBuckets.size() == 1 ? "" : "s",
                 formatBytes(2 * (n - 1) * summed / n), n == 1 ? "" : "s")
                 .str());
}

/// The fused ops' savings: attention, mixed precision's f32 activations,
/// chunked classifier losses.
void printFusions(const MemoryReport &r, llvm::raw_ostream &os) {
  if (!r.attention.empty()) {
    // One line a layer's attention: a step holds dozens.
    size_t rewritten =
        llvm::count_if(r.attention, [](const MemoryReport::Attention &a) {
          return a.rewritten;
        });
    const MemoryReport::Attention &first = r.attention.front();
    os << "  fused attention             " << r.attention.size() << " op"
       << (r.attention.size() == 1 ? "" : "s") << ", " << rewritten
       << " rewritten from softmax(q @ k^T) @ v; each saves "
       << formatBytes(first.savedBytes) << " (output, log-sum-exp), not "
       << formatBytes(first.probabilityBytes) << " of probabilities\n";
    for (const MemoryReport::Attention &a : r.attention)
      if (a.rewritten)
        os << "    rewritten at " << (a.location.empty() ? "-" : a.location)
           << "  " << (a.layer.empty() ? "-" : a.layer) << "  " << a.type
           << "\n";
  }
  if (r.mixedPrecision) {
    line(os, "f32 activations at the peak", r.f32ActivationBytes,
         "what mixed precision keeps in f32, and why:");
    for (const MemoryReport::KeptF32 &k : r.keptF32)
      os << "    " << k.op << " x" << k.count << "  " << formatBytes(k.bytes)
         << "  " << k.why << "\n";
  }
  for (const MemoryReport::Classifier &c : r.classifiers)
    os << "  fused classifier loss       " << c.rows << " rows x " << c.classes
       << " classes in chunks of " << c.chunkRows
       << " rows: " << formatBytes(c.chunkBytes) << " of logits at a time, not "
       << formatBytes(c.logitsBytes)
       << (c.gradientWithLoss ? " (and their gradient, in the same pass)"
           : c.gradient       ? " (and their gradient, recomputed)"
           : c.accuracy       ? " (the accuracy too, a chunk at a time)"
                              : "")
       << "\n";
}

/// The largest buffers live at the peak, in aligned columns.
void printLargestAtPeak(const MemoryReport &r, llvm::raw_ostream &os) {
  os << "  largest buffers live at the peak (op " << r.peakStep << " of "
     << r.steps << "):\n";
  size_t whereWidth = 8, layerWidth = 5, opWidth = 2, typeWidth = 4;
  for (const MemoryReport::Buffer &b : r.largestAtPeak) {
    whereWidth = std::max(whereWidth, b.location.size());
    layerWidth = std::max(layerWidth, b.layer.size());
    opWidth = std::max(opWidth, b.op.size());
    typeWidth = std::max(typeWidth, b.type.size());
  }
  for (const MemoryReport::Buffer &b : r.largestAtPeak)
    os << "    " << llvm::left_justify(b.location, whereWidth) << "  "
       << llvm::left_justify(b.layer.empty() ? "-" : b.layer, layerWidth)
       << "  " << llvm::left_justify(b.op, opWidth) << "  "
       << llvm::left_justify(b.type, typeWidth) << "  "
       << llvm::right_justify(formatBytes(b.bytes), 10) << "  " << b.kind
       << "\n";
}
} // namespace

void mnemo::printMemoryReport(const MemoryReport &r, llvm::raw_ostream &os) {
  os << "@" << r.function << "\n";
  printRegions(r, os);
  printRecomputation(r, os);
  line(os, "CPU trainer, on top, <=", r.trainerOverheadBytes,
       "threads, OpenBLAS's packing, 2 staging batches");
  printDataParallel(r, os);
  printFusions(r, os);
  printLargestAtPeak(r, os);
}

void mnemo::printMemoryReportJson(const std::vector<MemoryReport> &reports,
                                  llvm::raw_ostream &os) {
  llvm::json::Array functions;
  for (const MemoryReport &r : reports) {
    llvm::json::Array largest;
    for (const MemoryReport::Buffer &b : r.largestAtPeak)
      largest.push_back(llvm::json::Object{{"location", b.location},
                                           {"layer", b.layer},
                                           {"op", b.op},
                                           {"type", b.type},
                                           {"kind", b.kind},
                                           {"bytes", b.bytes}});
    llvm::json::Array attention;
    for (const MemoryReport::Attention &a : r.attention)
      attention.push_back(
          llvm::json::Object{{"location", a.location},
                             {"layer", a.layer},
                             {"type", a.type},
                             {"rewritten", a.rewritten},
                             {"saved_bytes", a.savedBytes},
                             {"probability_bytes", a.probabilityBytes}});
    llvm::json::Array classifiers;
    for (const MemoryReport::Classifier &c : r.classifiers)
      classifiers.push_back(
          llvm::json::Object{{"location", c.location},
                             {"layer", c.layer},
                             {"rows", c.rows},
                             {"classes", c.classes},
                             {"chunk_rows", c.chunkRows},
                             {"chunk_bytes", c.chunkBytes},
                             {"logits_bytes", c.logitsBytes},
                             {"gradient", c.gradient},
                             {"gradient_with_loss", c.gradientWithLoss},
                             {"accuracy", c.accuracy}});
    llvm::json::Array keptF32;
    for (const MemoryReport::KeptF32 &k : r.keptF32)
      keptF32.push_back(llvm::json::Object{{"op", k.op},
                                           {"why", k.why},
                                           {"count", k.count},
                                           {"bytes", k.bytes}});
    functions.push_back(llvm::json::Object{
        {"function", r.function},
        {"parameter_bytes", r.parameterBytes},
        {"buffer_bytes", r.bufferBytes},
        {"optimizer_state_bytes", r.optimizerStateBytes},
        {"prune_mask_bytes", r.pruneMaskBytes},
        {"trained_parameter_bytes", r.trainedParameterBytes},
        {"input_bytes", r.inputBytes},
        {"gradient_bytes", r.gradientRegionBytes + r.gradientBytes},
        {"gradients_persistent", r.gradientRegionBytes > 0},
        {"world_size", r.worldSize},
        {"unsharded_optimizer_state_bytes", r.unshardedStateBytes},
        {"gradient_bucket_bytes", llvm::json::Array(r.gradientBuckets)},
        {"activation_bytes", r.activationBytes},
        {"temporary_bytes", r.temporaryBytes},
        {"workspace_bytes", r.workspaceBytes},
        {"arena_bytes", r.arenaBytes},
        {"lower_bound_bytes", r.lowerBoundBytes},
        {"naive_bytes", r.naiveBytes},
        {"peak_bytes", r.peakBytes},
        {"cpu_peak_bytes", r.cpuPeakBytes},
        {"cuda_peak_bytes", r.cudaPeakBytes},
        {"cuda_workspace_bytes", r.cudaWorkspaceBytes},
        {"budget_device", r.budgetDevice},
        {"memory_budget_bytes", r.budgetBytes},
        {"recomputed_ops", r.recomputedOps},
        {"recomputed_flops", r.recomputedFlops},
        {"step_flops", r.stepFlops},
        {"remat_peak_bytes", r.rematPeakBytes},
        {"remat_solver", r.rematSolver},
        {"channel_blocked_values", r.channelBlockedValues},
        {"cpu_trainer_overhead_bytes", r.trainerOverheadBytes},
        {"peak_op", r.peakStep},
        {"ops", r.steps},
        {"planner", r.planner},
        {"largest_at_peak", std::move(largest)},
        {"attention", std::move(attention)},
        {"classifier_losses", std::move(classifiers)},
        {"f32_activation_bytes", r.f32ActivationBytes},
        {"kept_f32", std::move(keptF32)},
    });
  }
  os << llvm::formatv("{0:2}",
                      llvm::json::Value(llvm::json::Object{
                          {"version", 1}, {"functions", std::move(functions)}}))
     << "\n";
}
