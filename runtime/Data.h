//===- Data.h - Batches for the trainer -------------------------*- C++ -*-===//
//
// Where a trainer's batches come from, as bytes in the layout of the step's
// input region:
//
// - Image classification from IDX files (MNIST, Fashion-MNIST; .gz or raw):
//   one float input of H*W values per example (scaled to [0, 1]) and one
//   integer class target. Each epoch visits the examples in an order
//   shuffled by (seed, epoch), so any step's batch is known without
//   replaying the run (resume needs that).
// - Language modelling from token files: uint16 tokens, raw (nanoGPT) or
//   with llm.c's 1024-byte header. An i32[B, T] input and target, the
//   target shifted by one; windows start at positions drawn from (seed,
//   step).
// - Named arrays, for any inputs and targets (images, masks, float
//   targets, several inputs; or no target at all): a .safetensors file, or
//   a directory of train.safetensors (and test.safetensors) or
//   train/NAME.npy (and test/NAME.npy), one array per batch tensor named
//   after it. U8 arrays feed float inputs scaled to [0, 1], as images.
// - Replay: the batches a reference run recorded (mnemo-interp --dump),
//   named "<input>.<step>".
//
// Every batch is checked against the model (class and token ranges), so a
// bad file is an error message, not an out-of-range read in a kernel.
//
// Part of the runtime: plain C++17 and zlib, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_DATA_H
#define MNEMO_RUNTIME_DATA_H

#include "runtime/Model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mnemo::runtime {

/// The batch arguments of a step: inputs and targets, with their place in
/// the input region.
struct BatchLayout {
  std::vector<const ArgumentInfo *> tensors;
  int64_t batchSize = 0;
};
BatchLayout batchLayoutOf(const StepInfo &step);

/// Which rows of each global batch this process reads: in a data-parallel
/// run of `ranks` processes, global batch s is the batch one process with
/// ranks times the model's batch would read at step s (the same examples in
/// the same order), and rank r reads its rows [r * b, (r + 1) * b). One rank
/// reads the whole batch.
struct DataShard {
  int rank = 0;
  int ranks = 1;
};

class BatchSource {
public:
  virtual ~BatchSource() = default;
  /// Batches per epoch of the training split (global batches, when sharded).
  virtual int64_t stepsPerEpoch() const = 0;
  /// Writes the training batch of `step` (counting from 1) into `inputs`:
  /// this rank's rows of the global batch.
  virtual bool trainBatch(int64_t step, uint8_t *inputs,
                          std::string &error) = 0;
  /// Held-out batches for evaluation (0 when there are none).
  virtual int64_t evalBatches() const = 0;
  virtual bool evalBatch(int64_t index, uint8_t *inputs,
                         std::string &error) = 0;
  /// What the data is, for the log: "Fashion-MNIST train 60000, test 10000".
  virtual std::string describe() const = 0;
  /// The files it reads (no output may name one of them).
  virtual std::vector<std::string> files() const = 0;
};

/// Opens `path` for a model whose batch is `layout`: a directory of IDX
/// files, a token file, or a .safetensors file of recorded batches. Returns
/// null with `error` set when the data is missing, corrupt or does not fit
/// the model. `shard` says which rows of each global batch to read; held-out
/// batches are not sharded (the trainer gives each rank whole batches).
/// With `tokenStreams`, token data is read as contiguous streams (row b of
/// each batch continues row b of the one before), for models that carry
/// their state across batches; other data refuses it.
std::unique_ptr<BatchSource>
openBatchSource(const std::string &path, const BatchLayout &train,
                const BatchLayout &eval, uint64_t seed, std::string &error,
                bool tokenStreams = false, DataShard shard = {});

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_DATA_H
