//===- OptimizersEmission.cpp - The optimizer in the CPU and CUDA code ----===//
//
// The code generation models of the optimizer's ops: calls of the CPU
// kernels (OptimizersKernels.h), and on the GPU one kernel per op of
// OptimizersKernels.cuh, except for the Adam(W) and adamw8bit updates. Those
// are CudaMultiTensorOpInterface: the CUDA emitter groups the updates of an
// optimizer run that share their settings, and the group's first update
// writes one launch over a device table of all the group's tensors, with
// clip_grad_norm's multiply of each gradient folded in (the launch scales
// the gradient as it reads it).
//
// ZeRO-1 (--shard-optimizer): each rank updates the elements whose
// gradients lie in its part of the gradient region. The CPU step finds its
// parts at run time (StepMemory::shardPart); the plan fixes the world size
// and the parts, so the CUDA launches read their rank's row of a device
// table of every rank's parts, and the graph a rank captures is its own.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"
#include "lang/PlanAttributes.h"
#include "runtime/Model.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

constexpr const char *kCpuKernels = "lang/ops/optimizers/OptimizersKernels.h";
constexpr const char *kCudaKernels =
    "lang/ops/optimizers/OptimizersKernels.cuh";

std::string literal(APFloat value) {
  return doubleLiteral(value.convertToDouble());
}
const char *boolean(bool value) { return value ? "true" : "false"; }
int64_t elements(Value v) { return product(shapeOf(v)); }

//===----------------------------------------------------------------------===//
// The CPU
//===----------------------------------------------------------------------===//

/// ZeRO-1 (plan-gradient-exchange's shard-optimizer): where `grad`, an
/// update's gradient, lies in the gradient region; nullopt when the step's
/// optimizer state is not sharded.
std::optional<int64_t> shardedGradientOffset(Operation *op, Value grad) {
  auto func = op->getParentOfType<func::FuncOp>();
  GradientBucketsAttr buckets = func ? plan::gradientBuckets(func) : nullptr;
  if (!buckets || !buckets.getShardBytes())
    return std::nullopt;
  auto result = llvm::cast<OpResult>(grad);
  return plan::placement(result.getOwner())
      .getGradientOffsets()[result.getResultNumber()];
}

/// Opens the block that updates this rank's part of a tensor: `part` in
/// the generated code; its parameter and gradient pointers are offset by
/// part.first and its states lie in the rank's optimizer state.
void openShardPart(CpuKernelContext &context, int64_t gradientOffset,
                   int64_t elements) {
  context.out() << llvm::formatv(
      "  if (const mnemo::runtime::ShardPart part = memory.shardPart({0}, "
      "{1}); part.count > 0) {{\n",
      gradientOffset, elements);
}
std::string shardState(int t) {
  return "f32(S + part.state(" + std::to_string(t) + "))";
}

/// An update's skip flag (f16 loss scaling), its last operand: a pointer,
/// or nullptr without one.
template <typename Op>
std::string skipOf(Op op, const std::vector<std::string> &operands) {
  return op.getSkip() ? operands.back() : "nullptr";
}

LogicalResult emitLrScheduleCpu(LrScheduleOp op, CpuKernelContext &context) {
  auto p = context.operands({op.getStep(), op.getTotalSteps()});
  return context.call(
      kCpuKernels,
      llvm::formatv("*{0} = lrSchedule({1}, *{2}, *{3}, {4}, {5}, {6}, {7})",
                    context.result(), boolean(op.getKind() == "cosine"), p[0],
                    p[1], literal(op.getBaseLr()), op.getWarmup(),
                    op.getSteps(), literal(op.getMinLr())));
}

LogicalResult emitGlobalNormCpu(GlobalNormOp op, CpuKernelContext &context) {
  auto p = context.operands(op.getInputs());
  SmallVector<std::string> sizes;
  for (Value v : op.getInputs())
    sizes.push_back(std::to_string(elements(v)));
  context.include(kCpuKernels);
  if (shardedGradientOffset(op, op.getInputs().front())) {
    // ZeRO-1: each rank holds the sums of its part of the gradients; the
    // squares of the parts add up over the ranks.
    SmallVector<std::string> offsets;
    for (Value v : op.getInputs())
      offsets.push_back(std::to_string(*shardedGradientOffset(op, v)));
    context.out() << llvm::formatv(
        "  {{\n    const float *tensors[] = {{{0}};\n    int64_t sizes[] = "
        "{{{1}};\n    static const int64_t gradientOffsets[] = {{{2}};\n"
        "    for (int i = 0; i < {3}; ++i) {{\n      const "
        "mnemo::runtime::ShardPart part = memory.shardPart(gradientOffsets[i], "
        "sizes[i]);\n      tensors[i] += part.first;\n      sizes[i] = "
        "part.count;\n    }\n    double squares = sumOfSquares(tensors, "
        "sizes, {3});\n    if (memory.exchange)\n      "
        "memory.exchange->sumOverRanks(&squares, 1);\n    "
        "*{4} = float(std::sqrt(squares));\n  }\n",
        llvm::join(p, ", "), llvm::join(sizes, ", "), llvm::join(offsets, ", "),
        sizes.size(), context.result());
    return success();
  }
  context.out() << llvm::formatv(
      "  {{\n    const float *const tensors[] = {{{0}};\n    static const "
      "int64_t sizes[] = {{{1}};\n    *{2} = globalNorm(tensors, sizes, "
      "{3});\n  }\n",
      llvm::join(p, ", "), llvm::join(sizes, ", "), context.result(),
      sizes.size());
  return success();
}

LogicalResult emitLossScaleUpdateCpu(LossScaleUpdateOp op,
                                     CpuKernelContext &context) {
  auto p = context.operands({op.getNorm(), op.getScale(), op.getCount()});
  return context.call(
      kCpuKernels,
      llvm::formatv(
          "lossScaleUpdate(*{0}, *{1}, *{2}, {3}, {4}, {5}, {6}, {7}, {8})",
          p[0], p[1], p[2], context.result(0), context.result(1),
          context.result(2), literal(op.getGrowthFactor()),
          literal(op.getBackoffFactor()), op.getGrowthInterval()));
}

LogicalResult emitClipCoefficientCpu(ClipCoefficientOp op,
                                     CpuKernelContext &context) {
  std::string norm = context.operand(op.getNorm());
  return context.call(
      kCpuKernels,
      llvm::formatv("*{0} = mnemo::optimizers::clipCoefficient(*{1}, {2})",
                    context.result(), norm, literal(op.getMaxNorm())));
}

LogicalResult emitSgdCpu(SgdUpdateOp op, CpuKernelContext &context) {
  // param, grad, momentum_buffer, lr, step and the optional skip.
  auto p = context.operands(op->getOperands());
  context.include(kCpuKernels);
  if (std::optional<int64_t> at = shardedGradientOffset(op, op.getGrad())) {
    openShardPart(context, *at, elements(op.getParam()));
    context.out() << llvm::formatv(
        "    sgdUpdate(part.count, {0} + part.first, {1} + part.first, {2}, "
        "{0} + part.first, {2}, *{3}, *{4}, {5}, {6}, {7}, {8});\n  }\n",
        p[0], p[1], shardState(0), p[3], p[4], literal(op.getMomentum()),
        literal(op.getDampening()), literal(op.getWeightDecay()),
        boolean(op.getNesterov()));
    return success();
  }
  context.out() << llvm::formatv(
      "  sgdUpdate({0}, {1}, {2}, {3}, {4}, {5}, *{6}, *{7}, {8}, {9}, {10}, "
      "{11}, {12});\n",
      elements(op.getParam()), p[0], p[1], p[2], context.result(0),
      context.result(1), p[3], p[4], literal(op.getMomentum()),
      literal(op.getDampening()), literal(op.getWeightDecay()),
      boolean(op.getNesterov()), skipOf(op, p));
  return success();
}

LogicalResult emitAdamCpu(AdamUpdateOp op, CpuKernelContext &context) {
  // param, grad, exp_avg, exp_avg_sq, lr, step and the optional skip.
  auto p = context.operands(op->getOperands());
  context.include(kCpuKernels);
  if (std::optional<int64_t> at = shardedGradientOffset(op, op.getGrad())) {
    // In place: the parameter's part, and the moments in this rank's
    // optimizer state.
    openShardPart(context, *at, elements(op.getParam()));
    context.out() << llvm::formatv(
        "    adamUpdate(part.count, {0} + part.first, {1} + part.first, {2}, "
        "{3}, {0} + part.first, {2}, {3}, *{4}, *{5}, {6}, {7}, {8}, {9}, "
        "{10});\n  }\n",
        p[0], p[1], shardState(0), shardState(1), p[4], p[5],
        literal(op.getBeta1()), literal(op.getBeta2()), literal(op.getEps()),
        literal(op.getWeightDecay()), boolean(op.getDecoupled()));
    return success();
  }
  context.out() << llvm::formatv(
      "  adamUpdate({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, *{8}, *{9}, {10}, "
      "{11}, {12}, {13}, {14}, {15});\n",
      elements(op.getParam()), p[0], p[1], p[2], p[3], context.result(0),
      context.result(1), context.result(2), p[4], p[5], literal(op.getBeta1()),
      literal(op.getBeta2()), literal(op.getEps()),
      literal(op.getWeightDecay()), boolean(op.getDecoupled()), skipOf(op, p));
  return success();
}

/// adamw8bit's kernels read f32 parameters and moments only.
bool hasF32Parameter(Adam8bitUpdateOp op) {
  return llvm::cast<ShapedType>(op.getParam().getType())
      .getElementType()
      .isF32();
}

LogicalResult emitAdam8bitCpu(Adam8bitUpdateOp op, CpuKernelContext &context) {
  if (!hasF32Parameter(op))
    return op.emitError("adamw8bit needs f32 parameters");
  // param, grad, the moments' codes and maxima, lr, step and the optional
  // skip.
  auto p = context.operands(op->getOperands());
  auto bytes = [](const std::string &pointer) {
    return "reinterpret_cast<uint8_t *>(" + pointer + ")";
  };
  return context.call(
      kCpuKernels,
      llvm::formatv(
          "adam8bitUpdate({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
          "{10}, {11}, {12}, *{13}, *{14}, {15}, {16}, {17}, {18}, {19})",
          elements(op.getParam()), op.getBlockSize(), p[0], p[1], bytes(p[2]),
          p[3], bytes(p[4]), p[5], context.result(0), bytes(context.result(1)),
          context.result(2), bytes(context.result(3)), context.result(4), p[6],
          p[7], literal(op.getBeta1()), literal(op.getBeta2()),
          literal(op.getEps()), literal(op.getWeightDecay()), skipOf(op, p)));
}

//===----------------------------------------------------------------------===//
// The GPU
//===----------------------------------------------------------------------===//

LogicalResult emitLrScheduleCuda(LrScheduleOp op, CudaKernelContext &context) {
  context.include(kCudaKernels);
  context.launch(llvm::formatv("lrSchedule({0}, {1}, {2}, {3}, {4}, {5}, {6}, "
                               "{7});",
                               boolean(op.getKind() == "cosine"),
                               context.operand(op.getStep()),
                               context.operand(op.getTotalSteps()),
                               literal(op.getBaseLr()), op.getWarmup(),
                               op.getSteps(), literal(op.getMinLr()),
                               context.result()),
                 1, 1);
  return success();
}

/// ZeRO-1 on the GPU: the world size and each rank's share of the gradient
/// region, from the plan; none when the optimizer state is not sharded.
struct Shards {
  int64_t worldSize = 0, shardBytes = 0;
  runtime::ShardPart part(int64_t rank, int64_t gradientOffset,
                          int64_t elements) const {
    return runtime::shardPartOf(rank, shardBytes, gradientOffset, elements);
  }
};
std::optional<Shards> shardsOf(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  GradientBucketsAttr buckets = func ? plan::gradientBuckets(func) : nullptr;
  if (!buckets || !buckets.getShardBytes())
    return std::nullopt;
  return Shards{buckets.getWorldSize(), buckets.getShardBytes()};
}
/// The host expression a sharded launch passes as its Regions::index.
constexpr const char *kShardRank = "L.shardRank";

/// Every rank's rows of a sharded launch's device table: `entries`, with
/// rank r's from rowStart[r] to rowStart[r + 1], and its element count.
struct RankRows {
  SmallVector<std::string> entries;
  SmallVector<int64_t> rowStart{0}, elements;
  int64_t largest = 0;
  void endRank(int64_t count) {
    rowStart.push_back(int64_t(entries.size()));
    elements.push_back(count);
    largest = std::max(largest, count);
  }
  /// Declares the tables (the entries as `entryType`, and per rank {first
  /// row, rows, elements}) and launches `call` on `blocks` blocks, which
  /// sees its rank's rows as `rows` and `count`, their elements as
  /// `rank[2]`.
  void launch(CudaKernelContext &context, StringRef entryType,
              const std::string &call, int64_t blocks) const {
    std::string table = context.deviceTable(entryType, entries);
    SmallVector<std::string> ranks;
    for (size_t r = 0; r + 1 < rowStart.size(); ++r)
      ranks.push_back(llvm::formatv("{0}, {1}, {2}", rowStart[r],
                                    rowStart[r + 1] - rowStart[r],
                                    elements[r]));
    std::string rankTable = context.deviceTable("int64_t", ranks);
    context.launchIndexed(
        llvm::formatv(
            "{{ const int64_t *rank = {0} + 3 * r.index; const "
            "{1} *rows = {2} + rank[0]; int count = int(rank[1]); {3} }",
            rankTable, entryType, table, call),
        blocks, kCudaThreads, kShardRank);
  }
};

/// ZeRO-1: the sum of squares of this rank's parts of the gradients, summed
/// over the ranks (on the step's stream), then square-rooted.
LogicalResult emitShardedGlobalNormCuda(GlobalNormOp op,
                                        CudaKernelContext &context,
                                        const Shards &shards) {
  RankRows rows;
  for (int64_t r = 0; r < shards.worldSize; ++r) {
    int64_t count = 0;
    for (Value v : op.getInputs()) {
      std::optional<int64_t> at = shardedGradientOffset(op, v);
      if (!at)
        return context.error("internal error: a sharded gradient norm over a "
                             "tensor outside the gradient region");
      runtime::ShardPart part = shards.part(r, *at, elements(v));
      if (part.count == 0)
        continue;
      rows.entries.push_back(context.tensorRef(v, part.first, part.count));
      count += part.count;
    }
    rows.endRank(count);
  }
  int64_t blocks = op.getCudaBlocks();
  std::string partial = "f32(" + context.scratch(blocks * 4) + ")";
  rows.launch(context, "TensorRef",
              llvm::formatv("sumOfSquaresPartial<{0}>(r, rows, count, {1});",
                            context.elementType(op.getInputs().front()),
                            partial),
              blocks);
  context.launch(
      llvm::formatv("finishSumOfSquares({0}, {1}, 1.0f, false, {2});", partial,
                    blocks, context.result()),
      1, 1024);
  context.hostCode("L.sumOverRanks(" + context.hostOperand(op.getResult()) +
                   ");");
  // The square root of the sum, in place (a sum of one partial).
  context.launch(llvm::formatv("finishSumOfSquares({0}, 1, 1.0f, true, {0});",
                               context.result()),
                 1, 32);
  return success();
}

/// Partial sums of squares per block over a table of the gradients, then
/// their sum in order, square-rooted.
LogicalResult emitGlobalNormCuda(GlobalNormOp op, CudaKernelContext &context) {
  // Before the table: the table's type is the kernels'.
  context.include(kCudaKernels);
  if (std::optional<Shards> shards = shardsOf(op))
    return emitShardedGlobalNormCuda(op, context, *shards);
  SmallVector<std::string> refs;
  for (Value v : op.getInputs())
    refs.push_back(context.tensorRef(v));
  int64_t blocks = op.getCudaBlocks();
  std::string partial = "f32(" + context.scratch(blocks * 4) + ")";
  std::string table = context.deviceTable("TensorRef", refs);
  context.launch(llvm::formatv("sumOfSquaresPartial<{0}>(r, {1}, {2}, {3});",
                               context.elementType(op.getInputs().front()),
                               table, refs.size(), partial),
                 blocks, kCudaThreads);
  context.launch(llvm::formatv("finishSumOfSquares({0}, {1}, 1.0f, true, {2});",
                               partial, blocks, context.result()),
                 1, 1024);
  return success();
}

LogicalResult emitLossScaleUpdateCuda(LossScaleUpdateOp op,
                                      CudaKernelContext &context) {
  context.include(kCudaKernels);
  context.launch(
      llvm::formatv(
          "lossScaleUpdate({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, "
          "{8});",
          context.operand(op.getNorm()), context.operand(op.getScale()),
          context.operand(op.getCount()), context.result(0), context.result(1),
          context.result(2), literal(op.getGrowthFactor()),
          literal(op.getBackoffFactor()), op.getGrowthInterval()),
      1, 1);
  return success();
}

LogicalResult emitClipCoefficientCuda(ClipCoefficientOp op,
                                      CudaKernelContext &context) {
  context.include(kCudaKernels);
  context.launch(llvm::formatv("clipCoefficient({0}, {1}, {2});",
                               context.operand(op.getNorm()),
                               literal(op.getMaxNorm()), context.result()),
                 1, 1);
  return success();
}

/// ZeRO-1's updates read and write f32 parameters and states in place.
LogicalResult checkShardedParameter(Operation *op, Value param,
                                    CudaKernelContext &context) {
  if (!llvm::cast<ShapedType>(param.getType()).getElementType().isF32())
    return context.error("--shard-optimizer updates f32 parameters; this one "
                         "is not (train with f32 master weights)");
  return success();
}

/// ZeRO-1: the update of this rank's part of the parameter, in place, its
/// momentum in the rank's optimizer state.
LogicalResult emitShardedSgdCuda(SgdUpdateOp op, CudaKernelContext &context,
                                 const Shards &shards) {
  if (failed(checkShardedParameter(op, op.getParam(), context)))
    return failure();
  std::optional<int64_t> at = shardedGradientOffset(op, op.getGrad());
  SmallVector<std::string> rows;
  int64_t largest = 0;
  for (int64_t r = 0; r < shards.worldSize; ++r) {
    runtime::ShardPart part = shards.part(r, *at, elements(op.getParam()));
    rows.push_back(
        llvm::formatv("{0}, {1}, {2}", part.first, part.count, part.state(0)));
    largest = std::max(largest, part.count);
  }
  if (largest == 0)
    return success();
  std::string table = context.deviceTable("int64_t", rows);
  std::string param = context.operand(op.getParam()),
              grad = context.operand(op.getGrad());
  context.launchIndexed(
      llvm::formatv(
          "{{ const int64_t *part = {0} + 3 * r.index; float *param = {1} + "
          "part[0]; float *momentum = f32(r.S + part[2]); "
          "sgdUpdate<float>(part[1], param, {2} + part[0], momentum, param, "
          "momentum, {3}, {4}, {5}, {6}, {7}, {8}); }",
          table, param, grad, context.operand(op.getLr()),
          context.operand(op.getStep()), literal(op.getMomentum()),
          literal(op.getDampening()), literal(op.getWeightDecay()),
          boolean(op.getNesterov())),
      ceilDiv(largest, kCudaThreads), kCudaThreads, kShardRank);
  return success();
}

LogicalResult emitSgdCuda(SgdUpdateOp op, CudaKernelContext &context) {
  int64_t n = elements(op.getParam());
  context.include(kCudaKernels);
  if (std::optional<Shards> shards = shardsOf(op))
    return emitShardedSgdCuda(op, context, *shards);
  context.launch(
      llvm::formatv(
          "sgdUpdate<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, "
          "{11}, {12});",
          context.elementType(op.getParam()), n, context.operand(op.getParam()),
          context.operand(op.getGrad()),
          context.operand(op.getMomentumBuffer()), context.result(0),
          context.result(1), context.operand(op.getLr()),
          context.operand(op.getStep()), literal(op.getMomentum()),
          literal(op.getDampening()), literal(op.getWeightDecay()),
          boolean(op.getNesterov())),
      ceilDiv(n, kCudaThreads), kCudaThreads);
  return success();
}

/// The multi-tensor launches' last arguments: the f16 loss-scaling skip
/// flag and the folded clipping coefficient (null pointers when none).
std::string skipAndClip(CudaKernelContext &context, Value skip, Value grad) {
  Value clip = context.foldedScale(grad).scale;
  const char *none = "(const float *)nullptr";
  return (skip ? context.operand(skip) : none) + std::string(", ") +
         (clip ? context.operand(clip) : none);
}

/// The device table entries of `values` (a gradient as the launch reads
/// it).
std::string tableEntry(CudaKernelContext &context, ArrayRef<Value> values,
                       ArrayRef<int64_t> ints) {
  SmallVector<std::string> fields;
  for (Value v : values)
    fields.push_back(context.tensorRef(v));
  for (int64_t i : ints)
    fields.push_back(std::to_string(i));
  return "{" + llvm::join(fields, ", ") + "}";
}

/// ZeRO-1: one launch over this rank's parts of the group's tensors,
/// updated in place, their moments in the rank's optimizer state.
LogicalResult emitShardedAdamCuda(AdamUpdateOp op, CudaKernelContext &context,
                                  const Shards &shards) {
  for (Operation *member : context.group())
    if (failed(checkShardedParameter(
            member, llvm::cast<AdamUpdateOp>(member).getParam(), context)))
      return failure();
  const std::string state = std::to_string(int(MemoryRegion::OptimizerState));
  RankRows rows;
  for (int64_t r = 0; r < shards.worldSize; ++r) {
    int64_t first = 0;
    for (Operation *member : context.group()) {
      auto u = llvm::cast<AdamUpdateOp>(member);
      std::optional<int64_t> at = shardedGradientOffset(u, u.getGrad());
      runtime::ShardPart part = shards.part(r, *at, elements(u.getParam()));
      if (part.count == 0)
        continue;
      std::string param =
                      context.tensorRef(u.getParam(), part.first, part.count),
                  grad =
                      context.tensorRef(context.foldedScale(u.getGrad()).value,
                                        part.first, part.count);
      auto moment = [&](int t) {
        return "{" + state + ", " + std::to_string(part.state(t)) + ", " +
               std::to_string(part.count) + "}";
      };
      rows.entries.push_back(llvm::formatv("{{{0}, {1}, {2}, {3}, {0}, {2}, "
                                           "{3}, {4}}",
                                           param, grad, moment(0), moment(1),
                                           first));
      first += part.count;
    }
    rows.endRank(first);
  }
  if (rows.largest == 0)
    return success();
  rows.launch(context, "AdamTensor",
              llvm::formatv("adamMultiTensor<float>(r, rows, count, rank[2], "
                            "{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7});",
                            context.operand(op.getLr()),
                            context.operand(op.getStep()),
                            literal(op.getBeta1()), literal(op.getBeta2()),
                            literal(op.getEps()), literal(op.getWeightDecay()),
                            boolean(op.getDecoupled()),
                            skipAndClip(context, op.getSkip(), op.getGrad())),
              gridFor(rows.largest));
  return success();
}

/// One launch over the group's tensors, concatenated (adamMultiTensor).
LogicalResult emitAdamCuda(AdamUpdateOp op, CudaKernelContext &context) {
  // Before the table: the table's type is the kernels'.
  context.include(kCudaKernels);
  if (std::optional<Shards> shards = shardsOf(op))
    return emitShardedAdamCuda(op, context, *shards);
  SmallVector<std::string> entries;
  int64_t first = 0;
  for (Operation *member : context.group()) {
    auto u = llvm::cast<AdamUpdateOp>(member);
    entries.push_back(
        tableEntry(context,
                   {u.getParam(), context.foldedScale(u.getGrad()).value,
                    u.getExpAvg(), u.getExpAvgSq(), u.getNewParam(),
                    u.getNewExpAvg(), u.getNewExpAvgSq()},
                   {first}));
    first += elements(u.getParam());
  }
  std::string table = context.deviceTable("AdamTensor", entries);
  context.launch(
      llvm::formatv("adamMultiTensor<{0}>(r, {1}, {2}, {3}, {4}, {5}, {6}, "
                    "{7}, {8}, {9}, {10}, {11});",
                    context.elementType(op.getParam()), table, entries.size(),
                    first, context.operand(op.getLr()),
                    context.operand(op.getStep()), literal(op.getBeta1()),
                    literal(op.getBeta2()), literal(op.getEps()),
                    literal(op.getWeightDecay()), boolean(op.getDecoupled()),
                    skipAndClip(context, op.getSkip(), op.getGrad())),
      gridFor(first), kCudaThreads);
  return success();
}

/// One launch over the group's quantization blocks (adam8bitMultiTensor):
/// a CUDA block per quantization block, which holds its moments in shared
/// memory.
LogicalResult emitAdam8bitCuda(Adam8bitUpdateOp op,
                               CudaKernelContext &context) {
  // Before the table: the table's type is the kernels'.
  context.include(kCudaKernels);
  SmallVector<std::string> entries;
  int64_t firstBlock = 0;
  for (Operation *member : context.group()) {
    auto u = llvm::cast<Adam8bitUpdateOp>(member);
    if (!hasF32Parameter(u))
      return u.emitError("adamw8bit needs f32 parameters");
    int64_t n = elements(u.getParam());
    entries.push_back(tableEntry(
        context,
        {u.getParam(), context.foldedScale(u.getGrad()).value,
         u.getExpAvgCodes(), u.getExpAvgAbsmax(), u.getExpAvgSqCodes(),
         u.getExpAvgSqAbsmax(), u.getNewParam(), u.getNewExpAvgCodes(),
         u.getNewExpAvgAbsmax(), u.getNewExpAvgSqCodes(),
         u.getNewExpAvgSqAbsmax()},
        {n, firstBlock}));
    firstBlock += ceilDiv(n, op.getBlockSize());
  }
  // The kernel's shared memory holds one block's two moments.
  if (op.getBlockSize() > 4096)
    return context.error("adamw8bit's block may be at most 4096 elements on "
                         "the GPU");
  std::string table = context.deviceTable("Adam8bitTensor", entries);
  context.launch(
      llvm::formatv("adam8bitMultiTensor(r, {0}, {1}, {2}, {3}, {4}, {5}, "
                    "{6}, {7}, {8}, {9}, {10});",
                    table, entries.size(), firstBlock, op.getBlockSize(),
                    context.operand(op.getLr()), context.operand(op.getStep()),
                    literal(op.getBeta1()), literal(op.getBeta2()),
                    literal(op.getEps()), literal(op.getWeightDecay()),
                    skipAndClip(context, op.getSkip(), op.getGrad())),
      std::min<int64_t>(firstBlock, 1 << 20), kCudaThreads);
  return success();
}

/// Updates one launch may make together: the same op with the same
/// scalars, settings, skip flag and (Adam) element type.
bool sameSettings(AdamUpdateOp a, AdamUpdateOp b) {
  return a.getLr() == b.getLr() && a.getStep() == b.getStep() &&
         a.getBeta1() == b.getBeta1() && a.getBeta2() == b.getBeta2() &&
         a.getEps() == b.getEps() && a.getWeightDecay() == b.getWeightDecay() &&
         a.getDecoupled() == b.getDecoupled() && a.getSkip() == b.getSkip() &&
         llvm::cast<ShapedType>(a.getParam().getType()).getElementType() ==
             llvm::cast<ShapedType>(b.getParam().getType()).getElementType();
}
bool sameSettings(Adam8bitUpdateOp a, Adam8bitUpdateOp b) {
  return a.getLr() == b.getLr() && a.getStep() == b.getStep() &&
         a.getBeta1() == b.getBeta1() && a.getBeta2() == b.getBeta2() &&
         a.getEps() == b.getEps() && a.getWeightDecay() == b.getWeightDecay() &&
         a.getBlockSize() == b.getBlockSize() && a.getSkip() == b.getSkip();
}

/// Adam(W) and adamw8bit as multi-tensor updates. The launch can fold
/// clip_grad_norm's coefficient (and no other scale: the f16 unscaling
/// stays a multiply of its own).
template <typename Op>
struct MultiTensorModel
    : CudaMultiTensorOpInterface::ExternalModel<MultiTensorModel<Op>, Op> {
  bool sharesLaunchWith(Operation *op, Operation *other) const {
    auto same = llvm::dyn_cast<Op>(other);
    return same && sameSettings(llvm::cast<Op>(op), same);
  }
  Value getUpdatedGradient(Operation *op) const {
    return llvm::cast<Op>(op).getGrad();
  }
  bool foldsGradientScale(Operation *, Value scale) const {
    return scale.getDefiningOp<ClipCoefficientOp>() != nullptr;
  }
};

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerOptimizersEmissionModels(MLIRContext &context) {
  KernelFunctions<LrScheduleOp, emitLrScheduleCpu, emitLrScheduleCuda>::attach(
      context);
  KernelFunctions<GlobalNormOp, emitGlobalNormCpu, emitGlobalNormCuda>::attach(
      context);
  KernelFunctions<LossScaleUpdateOp, emitLossScaleUpdateCpu,
                  emitLossScaleUpdateCuda>::attach(context);
  KernelFunctions<ClipCoefficientOp, emitClipCoefficientCpu,
                  emitClipCoefficientCuda>::attach(context);
  KernelFunctions<SgdUpdateOp, emitSgdCpu, emitSgdCuda>::attach(context);
  KernelFunctions<AdamUpdateOp, emitAdamCpu, emitAdamCuda>::attach(context);
  KernelFunctions<Adam8bitUpdateOp, emitAdam8bitCpu, emitAdam8bitCuda>::attach(
      context);
  AdamUpdateOp::attachInterface<MultiTensorModel<AdamUpdateOp>>(context);
  Adam8bitUpdateOp::attachInterface<MultiTensorModel<Adam8bitUpdateOp>>(
      context);
}
