//===- PlanAttributes.cpp - The memory plan in the IR ---------------------===//

#include "lang/PlanAttributes.h"
#include "lang/MnemoDialect.h"
#include "lang/ModelAttributes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mnemo;

#define GET_ATTRDEF_CLASSES
#include "lang/MnemoAttrs.cpp.inc"

void MnemoDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "lang/MnemoAttrs.cpp.inc"
      >();
}

/// Where each attribute sits, spelled once.
static constexpr llvm::StringLiteral kStepPlan = "mnemo.plan";
static constexpr llvm::StringLiteral kRemat = "mnemo.remat";
static constexpr llvm::StringLiteral kSlot = "mnemo.slot";
static constexpr llvm::StringLiteral kPlacement = "mnemo.placement";
static constexpr llvm::StringLiteral kFused = "mnemo.fused";
static constexpr llvm::StringLiteral kRecomputed = "mnemo.recomputed";
static constexpr llvm::StringLiteral kRewrittenAttention =
    "mnemo.rewritten_attention";
static constexpr llvm::StringLiteral kReusesArg = "mnemo.reuses_arg";
static constexpr llvm::StringLiteral kGradientBuckets =
    "mnemo.gradient_buckets";
static constexpr llvm::StringLiteral kGradientSync = "mnemo.gradient_sync";

FailureOr<MemoryRegion> mnemo::parseMemoryRegion(AsmParser &parser) {
  std::string name;
  SMLoc at = parser.getCurrentLocation();
  if (parser.parseKeywordOrString(&name))
    return failure();
  MemoryRegion region;
  if (!parseRegionName(name.c_str(), region))
    return parser.emitError(at) << "unknown memory region '" << name
                                << "' (arena, parameters, gradients, "
                                   "optimizer_state, inputs, workspace, "
                                   "buffers)";
  return region;
}

FailureOr<SmallVector<int64_t>> mnemo::parseIntegerList(AsmParser &parser) {
  SmallVector<int64_t> list;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        return parser.parseInteger(list.emplace_back());
      }))
    return failure();
  return list;
}

void mnemo::printIntegerList(AsmPrinter &printer, ArrayRef<int64_t> list) {
  printer << "[";
  llvm::interleaveComma(list, printer);
  printer << "]";
}

FailureOr<bool> mnemo::parseFlag(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (parser.parseKeyword("false", " or 'true'"))
    return failure();
  return false;
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult SlotAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               MemoryRegion region, int64_t offset) {
  if (region != MemoryRegion::Parameters &&
      region != MemoryRegion::OptimizerState &&
      region != MemoryRegion::Inputs && region != MemoryRegion::Buffers)
    return emitError() << "a step argument lives in parameters, buffers, "
                          "optimizer_state or inputs, not "
                       << regionName(region);
  if (offset < 0)
    return emitError() << "an argument's offset is not negative";
  return success();
}

LogicalResult PlacementAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, ArrayRef<int64_t> offsets,
    ArrayRef<int64_t> sizes, ArrayRef<int64_t> aliases,
    ArrayRef<int64_t> gradientOffsets, bool stridedView, bool channelBlocked) {
  if (sizes.size() != offsets.size())
    return emitError() << "has " << offsets.size() << " offsets and "
                       << sizes.size() << " sizes";
  for (auto [name, list] :
       {std::pair<const char *, ArrayRef<int64_t>>{"aliases", aliases},
        {"gradient_offsets", gradientOffsets}})
    if (!list.empty() && list.size() != offsets.size())
      return emitError() << "has " << list.size() << " " << name << " for "
                         << offsets.size() << " results";
  if (channelBlocked && stridedView)
    return emitError() << "a strided view is not channel-blocked";
  for (size_t r = 0; r < offsets.size(); ++r)
    if (offsets[r] < -1 || sizes[r] < 0)
      return emitError() << "result " << r << " is placed at " << offsets[r]
                         << " with " << sizes[r] << " bytes";
  return success();
}

LogicalResult StepPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t arenaBytes, int64_t lowerBoundBytes,
                                   int64_t naiveBytes, int64_t gradientBytes,
                                   int64_t workspaceBytes,
                                   int64_t cudaWorkspaceBytes,
                                   StringRef planner, StringRef budgetDevice) {
  for (int64_t bytes : {arenaBytes, lowerBoundBytes, naiveBytes, gradientBytes,
                        workspaceBytes, cudaWorkspaceBytes})
    if (bytes < 0)
      return emitError() << "a region's size is not negative";
  if (lowerBoundBytes > arenaBytes)
    return emitError() << "the arena (" << arenaBytes
                       << " bytes) is below its lower bound ("
                       << lowerBoundBytes << ")";
  if (budgetDevice != "cpu" && budgetDevice != "cuda")
    return emitError() << "budget_device is cpu or cuda, not '" << budgetDevice
                       << "'";
  return success();
}

LogicalResult RematAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StringRef strategy, int64_t recomputedOps,
                                int64_t recomputedFlops, int64_t stepFlops,
                                int64_t memoryBudget, int64_t peakBytes,
                                StringRef solver) {
  if (!llvm::is_contained({"none", "all", "sqrt", "auto", "optimal"}, strategy))
    return emitError() << "unknown remat strategy '" << strategy << "'";
  if (recomputedOps < 0 || recomputedFlops < 0 || stepFlops < 0 ||
      memoryBudget < 0 || peakBytes < 0)
    return emitError() << "remat's counts are not negative";
  return success();
}

LogicalResult
GradientBucketsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            int64_t worldSize, ArrayRef<int64_t> offsets,
                            ArrayRef<int64_t> sizes, int64_t shardBytes,
                            int64_t stateTensors) {
  if (shardBytes < 0 || shardBytes % 64 || stateTensors < 0)
    return emitError() << "a rank's shard is a multiple of 64 bytes and its "
                          "optimizer states are counted, not negative";
  if (worldSize < 1)
    return emitError() << "gradient buckets are for 1 or more ranks, not "
                       << worldSize;
  if (offsets.size() != sizes.size() || offsets.empty())
    return emitError() << "gradient buckets need one offset and one size each";
  for (auto [offset, size] : llvm::zip(offsets, sizes))
    if (offset < 0 || size <= 0 || offset % 4 || size % 4)
      return emitError() << "a gradient bucket holds f32 values at a "
                            "non-negative offset";
  return success();
}

LogicalResult MnemoDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  if (model::isModelAttribute(attr))
    return model::verifyOperationAttribute(op, attr);
  StringRef name = attr.getName().getValue();
  if (name == kPlacement) {
    auto placed = llvm::dyn_cast<PlacementAttr>(attr.getValue());
    if (!placed)
      return op->emitError()
             << "'" << kPlacement << "' must be a #mnemo.placement";
    if (placed.getOffsets().size() != op->getNumResults())
      return op->emitError() << "is placed for " << placed.getOffsets().size()
                             << " results but has " << op->getNumResults();
    return success();
  }
  if (name == kStepPlan || name == kRemat) {
    if (!llvm::isa<func::FuncOp>(op))
      return op->emitError() << "'" << name << "' belongs on a step function";
    bool right = name == kStepPlan ? llvm::isa<StepPlanAttr>(attr.getValue())
                                   : llvm::isa<RematAttr>(attr.getValue());
    if (!right)
      return op->emitError()
             << "'" << name << "' must be a #"
             << (name == kStepPlan ? "mnemo.step_plan" : "mnemo.remat");
    return success();
  }
  if (name == kGradientBuckets &&
      (!llvm::isa<func::FuncOp>(op) ||
       !llvm::isa<GradientBucketsAttr>(attr.getValue())))
    return op->emitError() << "'" << name
                           << "' is a #mnemo.gradient_buckets on a step";
  if (name == kGradientSync) {
    auto sync = llvm::dyn_cast<GradientSyncAttr>(attr.getValue());
    if (!sync)
      return op->emitError()
             << "'" << name << "' must be a #mnemo.gradient_sync";
    auto func = op->getParentOfType<func::FuncOp>();
    GradientBucketsAttr buckets =
        func ? func->getAttrOfType<GradientBucketsAttr>(kGradientBuckets)
             : nullptr;
    int64_t count = buckets ? int64_t(buckets.getOffsets().size()) : 0;
    for (int64_t b :
         llvm::concat<const int64_t>(sync.getReady(), sync.getAwait()))
      if (b < 0 || b >= count)
        return op->emitError() << "gradient bucket " << b
                               << " is not one of its step's " << count;
    return success();
  }
  if ((name == kFused || name == kRecomputed || name == kRewrittenAttention) &&
      !llvm::isa<UnitAttr>(attr.getValue()))
    return op->emitError() << "'" << name << "' is a unit attribute";
  return success();
}

LogicalResult MnemoDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  if (model::isModelAttribute(attr))
    return model::verifyArgumentAttribute(op, argIndex, attr);
  if (attr.getName().getValue() == kSlot &&
      !llvm::isa<SlotAttr>(attr.getValue()))
    return op->emitError() << "argument " << argIndex << "'s '" << kSlot
                           << "' must be a #mnemo.slot";
  return success();
}

LogicalResult MnemoDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  if (model::isModelAttribute(attr))
    return model::verifyResultAttribute(op, resultIndex, attr);
  if (attr.getName().getValue() == kReusesArg &&
      !llvm::isa<IntegerAttr>(attr.getValue()))
    return op->emitError() << "result " << resultIndex << "'s '" << kReusesArg
                           << "' must be an integer";
  return success();
}

//===----------------------------------------------------------------------===//
// A whole plan
//===----------------------------------------------------------------------===//

static const char *const kPlanNote =
    " (run the default pipeline, or plan-memory, on it first)";

LogicalResult plan::checkPlanned(func::FuncOp func) {
  StepPlanAttr stepPlan = plan::stepPlan(func);
  if (!stepPlan)
    return emitError(func.getLoc())
           << "@" << func.getName() << " has no memory plan" << kPlanNote;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (!slot(func, i))
      return emitError(func.getLoc())
             << "@" << func.getName() << ": argument " << i
             << " has no planned region and offset" << kPlanNote;
  int64_t arena = stepPlan.getArenaBytes();
  for (Operation &op : func.getBody().front().without_terminator()) {
    PlacementAttr placed = placement(&op);
    if (!placed)
      return op.emitError() << "has no placement in the plan" << kPlanNote;
    // (The dialect's verifier checked one entry per result.)
    for (auto [r, offset] : llvm::enumerate(placed.getOffsets()))
      if (offset >= 0 && offset + placed.getSizes()[r] > arena)
        return op.emitError()
               << "result " << r << " is placed at [" << offset << ", +"
               << placed.getSizes()[r] << "), outside the arena of " << arena
               << " bytes";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Accessors
//===----------------------------------------------------------------------===//

StepPlanAttr plan::stepPlan(func::FuncOp func) {
  return func->getAttrOfType<StepPlanAttr>(kStepPlan);
}

void plan::setStepPlan(func::FuncOp func, StepPlanAttr plan) {
  func->setAttr(kStepPlan, plan);
}

GradientBucketsAttr plan::gradientBuckets(func::FuncOp func) {
  return func->getAttrOfType<GradientBucketsAttr>(kGradientBuckets);
}

void plan::setGradientBuckets(func::FuncOp func, GradientBucketsAttr buckets) {
  func->setAttr(kGradientBuckets, buckets);
}

GradientSyncAttr plan::gradientSync(Operation *op) {
  return op->getAttrOfType<GradientSyncAttr>(kGradientSync);
}

void plan::setGradientSync(Operation *op, GradientSyncAttr sync) {
  op->setAttr(kGradientSync, sync);
}

RematAttr plan::remat(func::FuncOp func) {
  return func->getAttrOfType<RematAttr>(kRemat);
}

void plan::setRemat(func::FuncOp func, RematAttr remat) {
  func->setAttr(kRemat, remat);
}

SlotAttr plan::slot(func::FuncOp func, unsigned index) {
  return func.getArgAttrOfType<SlotAttr>(index, kSlot);
}

void plan::setSlots(func::FuncOp func, ArrayRef<SlotAttr> slots) {
  SmallVector<DictionaryAttr> all;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    NamedAttrList attrs(func.getArgAttrDict(i));
    attrs.set(kSlot, slots[i]);
    all.push_back(attrs.getDictionary(func.getContext()));
  }
  func.setAllArgAttrs(all);
}

std::optional<unsigned> plan::reusedArgument(func::FuncOp func,
                                             unsigned index) {
  if (auto a = func.getResultAttrOfType<IntegerAttr>(index, kReusesArg))
    return unsigned(a.getInt());
  return std::nullopt;
}

void plan::setReusedArgument(func::FuncOp func, unsigned index,
                             unsigned argument) {
  Builder b(func.getContext());
  func.setResultAttr(index, kReusesArg, b.getI64IntegerAttr(argument));
}

NamedAttribute plan::reusedArgumentAttr(Builder &builder, unsigned argument) {
  return builder.getNamedAttr(kReusesArg, builder.getI64IntegerAttr(argument));
}

PlacementAttr plan::placement(Operation *op) {
  return op->getAttrOfType<PlacementAttr>(kPlacement);
}

void plan::setPlacement(Operation *op, PlacementAttr placement) {
  op->setAttr(kPlacement, placement);
}

int64_t plan::arenaOffset(Operation *op, unsigned index) {
  PlacementAttr p = placement(op);
  return p && index < p.getOffsets().size() ? p.getOffsets()[index] : -1;
}

bool plan::isChannelBlocked(Value v) {
  auto result = llvm::dyn_cast<OpResult>(v);
  if (!result || result.getResultNumber() != 0)
    return false;
  PlacementAttr p = placement(result.getOwner());
  return p && p.getChannelBlocked();
}

bool plan::isRewrittenAttention(Operation *op) {
  return op->hasAttr(kRewrittenAttention);
}

void plan::markRewrittenAttention(Operation *op) {
  op->setAttr(kRewrittenAttention, UnitAttr::get(op->getContext()));
}

bool plan::isFused(Operation *op) { return op->hasAttr(kFused); }

void plan::markFused(Operation *op) {
  op->setAttr(kFused, UnitAttr::get(op->getContext()));
}

bool plan::isRecomputed(Operation *op) { return op->hasAttr(kRecomputed); }

void plan::markRecomputed(Operation *op) {
  op->setAttr(kRecomputed, UnitAttr::get(op->getContext()));
}
