//===- MemoryReport.h - Where every byte of a step goes ---------*- C++ -*-===//
//
// Reads a planned step function (after plan-memory) and says how many bytes
// one step needs and what holds them: the persistent regions (parameters,
// optimizer state, the batch), the arena with its lower bound and its size
// without reuse, and the largest buffers live at the peak, each with the
// model-file location, layer and op it comes from. `mnemoc --memory-report`
// prints it as a table or as JSON (schema in docs/memory.md).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_MEMORYREPORT_H
#define MNEMO_PASSES_MEMORYREPORT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mnemo {

struct MemoryReport {
  std::string function;
  int64_t parameterBytes = 0, optimizerStateBytes = 0, inputBytes = 0;
  /// State that is not trained: running statistics, quantization observers.
  int64_t bufferBytes = 0;
  /// Of the optimizer state: pruning masks (1 bit per element), and the
  /// elements of the weights they mask.
  int64_t pruneMaskBytes = 0, maskedElements = 0;
  /// An inference plan's parameters as trained (f32, uncompressed); 0 for
  /// a training plan (passes/CompressWeights.cpp).
  int64_t trainedParameterBytes = 0;
  /// The persistent gradient region (0 when gradients are in the arena).
  int64_t gradientRegionBytes = 0;
  /// Data parallelism (mnemoc --world-size): the ranks, and the bytes of
  /// each gradient bucket summed over them every step.
  int64_t worldSize = 1;
  std::vector<int64_t> gradientBuckets;
  /// ZeRO-1: the optimizer state of one process (optimizerStateBytes is
  /// then one rank's part); 0 unsharded.
  int64_t unshardedStateBytes = 0;
  /// Arena bytes by kind, live at the peak step.
  int64_t gradientBytes = 0, activationBytes = 0, temporaryBytes = 0;
  int64_t workspaceBytes = 0;
  int64_t arenaBytes = 0, lowerBoundBytes = 0, naiveBytes = 0;
  /// The CUDA backend's workspace (cuBLASLt, cuDNN, partial sums).
  int64_t cudaWorkspaceBytes = 0;
  /// Everything one step needs on the CPU (persistent regions, arena and
  /// workspace) and on a GPU (the same with the CUDA workspace, a second
  /// batch buffer and the control block: the executor's one cudaMalloc).
  int64_t cpuPeakBytes = 0, cudaPeakBytes = 0;
  /// "cpu" or "cuda": the device the budget is for (mnemoc --device).
  std::string budgetDevice = "cpu";
  /// The budget device's peak: what --memory-budget and --fit-batch bound.
  int64_t peakBytes = 0;
  /// What the CPU trainer needs on top (runtime/Overhead.h).
  int64_t trainerOverheadBytes = 0;
  int64_t peakStep = 0, steps = 0;
  std::string planner;
  /// Rematerialization under a memory budget (the remat pass): the budget
  /// (0: none), the ops recomputed in the backward and their FLOPs next to
  /// the step's.
  int64_t budgetBytes = 0, recomputedOps = 0, recomputedFlops = 0,
          stepFlops = 0;
  /// The peak remat tuned its choice for (0: no budget): the pipeline's
  /// planning tail on the chosen set, which peakBytes must equal.
  int64_t rematPeakBytes = 0;
  /// How --remat=optimal's solver ended ("" for other strategies).
  std::string rematSolver;
  /// Fused attention ops of the step: where each is, and whether the
  /// fuse-attention rewrite made it from a written-out softmax(q @ k^T) @ v
  /// (otherwise the model called attention()); and what one of them saves
  /// for the backward (the output and the log-sum-exp) against the [Tq, Tk]
  /// probabilities written-out attention keeps.
  struct Attention {
    std::string location, layer, type;
    bool rewritten = false;
    int64_t savedBytes = 0, probabilityBytes = 0;
  };
  std::vector<Attention> attention;
  /// Fused classifier losses (linear_cross_entropy): where each is, its
  /// rows and classes, the rows a chunk holds, and the bytes of that
  /// chunk's logits against the whole logits written out.
  struct Classifier {
    std::string location, layer;
    int64_t rows = 0, classes = 0, chunkRows = 0, chunkBytes = 0,
            logitsBytes = 0;
    /// The training step computes the logits' gradient, recomputing the
    /// chunks in the backward or (`gradientWithLoss`) in the loss's own
    /// pass; the op reports the accuracy too (the evaluation step's).
    bool gradient = false, gradientWithLoss = false, accuracy = false;
  };
  std::vector<Classifier> classifiers;
  /// Under mixed precision (the step holds 16-bit floats): the
  /// activations at the peak that are f32, by op and why they stay f32.
  struct KeptF32 {
    std::string op, why;
    int64_t bytes = 0, count = 0;
  };
  bool mixedPrecision = false;
  int64_t f32ActivationBytes = 0;
  std::vector<KeptF32> keptF32;
  /// What is recomputed, by op: "mnemo.gelu" x 4, most first.
  std::vector<std::pair<std::string, int64_t>> recomputed;
  /// How many of the arena's activations the CPU keeps in blocks of
  /// channels (passes/ChannelLayout.h).
  int64_t channelBlockedValues = 0;

  struct Buffer {
    std::string location; // in the model file: "examples/gpt.mn:14:9"
    std::string layer;    // "blocks.3.attn", or "" for the model itself
    std::string op;       // "mnemo.softmax"
    std::string type;     // "f32[16,4,64,64]"
    std::string kind;     // activation, gradient, temporary
    int64_t bytes = 0;
  };
  std::vector<Buffer> largestAtPeak; // at most ten, largest first
};

/// Fails with an error on `func` if it has no memory plan.
mlir::FailureOr<MemoryReport> buildMemoryReport(mlir::func::FuncOp func);

void printMemoryReport(const MemoryReport &report, llvm::raw_ostream &os);
void printMemoryReportJson(const std::vector<MemoryReport> &reports,
                           llvm::raw_ostream &os);

/// "1.55 MiB".
std::string formatBytes(int64_t bytes);

} // namespace mnemo

#endif // MNEMO_PASSES_MEMORYREPORT_H
