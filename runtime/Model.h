//===- Model.h - What a compiled model tells its trainer --------*- C++ -*-===//
//
// The compiler emits one ModelInfo per model: the planned step functions and
// everything the trainer needs to run them without knowing the model (which
// argument is a parameter, where each lives, how it is initialized, the
// train settings). The trainer allocates the regions it describes once and
// calls the steps with pointers into them.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_MODEL_H
#define MNEMO_RUNTIME_MODEL_H

#include "runtime/ArgumentRole.h"
#include "runtime/MemoryRegion.h"

#include <cstdint>
#include <string>

namespace mnemo::runtime {

/// How a data-parallel training step sums its gradients over the ranks
/// (runtime/Ranks.h). The step calls gradientsReady(k) as soon as the
/// planned schedule has finished every gradient of bucket k (a contiguous
/// range of the gradient region), so that the sum runs while the backward
/// goes on, and awaitGradients(k) before the first op that reads one of
/// them (the optimizer's update, the gradient norm). Every rank runs the
/// same plan, so the buckets become ready in the same order everywhere.
///
/// With the optimizer state sharded (ZeRO-1), a bucket is reduce-scattered:
/// each rank gets the sums of its part of the gradient region only, the
/// step's gradient norm adds the ranks' sums of squares (sumOverRanks), the
/// updates run on the rank's part, and gatherParameters() at the end of
/// the step gives every rank every updated parameter.
class GradientExchange {
public:
  virtual ~GradientExchange() = default;
  virtual void gradientsReady(int bucket) = 0;
  virtual void awaitGradients(int bucket) = 0;
  virtual void sumOverRanks(double *values, int count) = 0;
  virtual void gatherParameters() = 0;
};

/// The elements of a tensor that a rank updates under ZeRO-1: those whose
/// gradients lie in its part of the gradient region.
struct ShardPart {
  int64_t first = 0, count = 0;
  /// Bytes into the rank's optimizer state where state 0 of `first` lies;
  /// state t lies t * stateStride further.
  int64_t stateOffset = 0, stateStride = 0;
  int64_t state(int t) const { return t * stateStride + stateOffset; }
};

/// The part of a tensor of `elements` f32 values, whose gradient lies at
/// `gradientOffset`, that rank `rank` updates when each rank owns
/// `shardBytes` of the gradient region. The plan fixes both, so the CUDA
/// emitter computes every rank's parts at compile time, and the CPU step
/// its own at run time.
inline ShardPart shardPartOf(int64_t rank, int64_t shardBytes,
                             int64_t gradientOffset, int64_t elements) {
  ShardPart part;
  int64_t begin = rank * shardBytes, end = begin + shardBytes;
  int64_t lo = gradientOffset > begin ? gradientOffset : begin;
  int64_t hi = gradientOffset + 4 * elements;
  hi = hi < end ? hi : end;
  if (lo >= hi)
    return part;
  part.first = (lo - gradientOffset) / 4;
  part.count = (hi - lo) / 4;
  part.stateOffset = lo - begin;
  part.stateStride = shardBytes;
  return part;
}

/// The memory a step runs in: one pointer per region of the plan.
struct StepMemory {
  uint8_t *arena;
  uint8_t *parameters;
  uint8_t *gradients;
  uint8_t *optimizerState;
  uint8_t *inputs;
  uint8_t *workspace;
  uint8_t *buffers;
  /// The region's base (an argument's region, the arena, ...).
  uint8_t *base(MemoryRegion region) const {
    switch (region) {
    case MemoryRegion::Arena:
      return arena;
    case MemoryRegion::Parameters:
      return parameters;
    case MemoryRegion::Gradients:
      return gradients;
    case MemoryRegion::OptimizerState:
      return optimizerState;
    case MemoryRegion::Inputs:
      return inputs;
    case MemoryRegion::Workspace:
      return workspace;
    case MemoryRegion::Buffers:
      return buffers;
    }
    return nullptr;
  }
  /// Seconds spent in each op, accumulated when profiling (--profile);
  /// null otherwise.
  double *opSeconds = nullptr;
  /// The other ranks of a data-parallel run; null in a single process.
  GradientExchange *exchange = nullptr;
  /// ZeRO-1: this rank's part of the gradient region (shardBytes 0: the
  /// optimizer state is not sharded).
  int64_t shardRank = 0, shardBytes = 0;

  /// The part of a tensor of `elements` f32 values, whose gradient lies at
  /// `gradientOffset`, that this rank updates.
  ShardPart shardPart(int64_t gradientOffset, int64_t elements) const {
    return shardPartOf(shardRank, shardBytes, gradientOffset, elements);
  }
};

/// Under ZeRO-1, where each updated parameter lies in the parameter region
/// and where its gradient lies in the gradient region.
struct ParameterPlace {
  int64_t parameterOffset;
  int64_t gradientOffset;
  int64_t bytes;
};

/// A bucket of gradients summed over the ranks in one collective: f32
/// values at a byte offset of the gradient region.
struct GradientBucket {
  int64_t offset;
  int64_t bytes;
};

/// One argument of a step function.
struct ArgumentInfo {
  const char *name; // "fc1.weight", "fc1.weight.exp_avg", "image", "step"
  ArgumentRole role;
  const char *dtype; // f32, bf16, f16, i32, i8, i1
  int rank;
  int64_t shape[8];
  MemoryRegion region; // Parameters, OptimizerState or Inputs
  int64_t offset;      // in the region
  int64_t bytes;       // aligned
  const char *init;    // the initializer as JSON ({"kind": ...}), or ""
  /// For integer inputs read as indices (class targets, token ids): values
  /// must lie in [0, indexLimit); 0 when unconstrained.
  int64_t indexLimit;
  /// For a loss's class targets: whether a value of ignoredIndex (the
  /// loss's ignore_index) may stand in for a class, as PyTorch's -100.
  bool ignores = false;
  int64_t ignoredIndex = 0;

  /// The number of elements: the product of the shape.
  int64_t elements() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= shape[d];
    return n;
  }
  /// "f32[8,784]", for messages.
  std::string typeText() const {
    std::string text = std::string(dtype) + "[";
    for (int d = 0; d < rank; ++d)
      text += (d ? "," : "") + std::to_string(shape[d]);
    return text + "]";
  }
};

/// A result the trainer reads (loss, lr, grad_norm, accuracy): an f32
/// scalar at an arena offset. Updated parameters and state are written in
/// place and are not listed.
struct ResultInfo {
  const char *name;
  int64_t arenaOffset;
};

struct StepInfo {
  /// Null when the model has no such step.
  void (*run)(const StepMemory &memory, int64_t dropoutStep);
  int64_t arenaBytes;
  int64_t gradientBytes;
  int64_t workspaceBytes;
  int numArguments;
  const ArgumentInfo *arguments;
  int numResults;
  const ResultInfo *results;
  /// Where each op of the step comes from ("mlp.mn:13:21 fc1: mnemo.matmul"),
  /// indexing StepMemory::opSeconds.
  int numOps;
  const char *const *opNames;
  /// Data parallelism (mnemoc --world-size N, N > 1): the train step's
  /// gradient buckets, in the order the step makes them ready.
  int numGradientBuckets = 0;
  const GradientBucket *gradientBuckets = nullptr;
  /// ZeRO-1 (mnemoc --shard-optimizer): each rank's part of the (padded)
  /// gradient region, the optimizer states per element (each rank keeps
  /// stateTensors * shardBytes), and the parameters the update writes.
  /// The optimizer state arguments' offsets are in the full layout
  /// (stateTensors copies of the gradient region).
  int64_t shardBytes = 0;
  int stateTensors = 0;
  int numParameterPlaces = 0;
  const ParameterPlace *parameterPlaces = nullptr;
};

struct ModelInfo {
  const char *name;
  const char *sourceFile;
  const char *hyperparams; // JSON object
  const char *train;       // JSON object: the train section's settings
  StepInfo trainStep;
  StepInfo evalStep;
  /// The ranks the plan was made for (mnemoc --world-size): a data-parallel
  /// launch must start exactly as many.
  int worldSize = 1;
  /// A hash of the generated step code: ranks of one run must agree on it
  /// (another build or another -D makes another plan).
  const char *planHash = "";
  /// The precision the step computes in (mnemoc --precision or the train
  /// section's): "f32", "bf16" or "f16". A run's --dump records it, so a
  /// replay in PyTorch computes as the run did.
  const char *precision = "f32";
};

} // namespace mnemo::runtime

/// Defined by the generated code.
extern "C" const mnemo::runtime::ModelInfo *mnemoModel();

#endif // MNEMO_RUNTIME_MODEL_H
