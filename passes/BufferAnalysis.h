//===- BufferAnalysis.h - Which values need memory, and when ----*- C++ -*-===//
//
// Turns a step function into buffers with live intervals over its op order,
// the input of the offset planners:
//
// - Arguments live in persistent regions by role (parameters, optimizer
//   state, the batch), not in the arena.
// - Views share their source's buffer: a reshape, and a transpose, which its
//   consumers read with permuted strides (a reshape of such a view is
//   materialized).
// - An elementwise op may write into an operand's buffer when that buffer
//   dies at the op and has the same size (in-place reuse).
// - A result marked `mnemo.reuses_arg` (an optimizer update) is written
//   into that argument's persistent buffer.
// - Splat constants are not materialized (kernels read them as scalars).
// - Values marked `mnemo.fused` are computed inside their consumer's loop:
//   no buffer, and what they read stays live until that loop runs.
//
// Everything else gets an arena buffer live from its definition to its last
// use, or to the end when the function returns it.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_BUFFERANALYSIS_H
#define MNEMO_PASSES_BUFFERANALYSIS_H

#include "passes/MemoryPlanner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <string>
#include <vector>

namespace mnemo {

/// What a buffer holds, for the memory report.
enum class BufferKind { Activation, Gradient, Temporary };
const char *spell(BufferKind kind);

struct ArenaBuffer {
  BufferInterval interval;
  BufferKind kind = BufferKind::Temporary;
  mlir::Value root; // the value that created the buffer
  std::vector<mlir::Value>
      values; // every value stored in it (views, in-place results)
};

/// Where a value's bytes are.
struct Placement {
  enum class Where { Arena, Argument, None } where = Where::None;
  int buffer = -1;       // Arena: index into BufferAnalysis::buffers
  unsigned argument = 0; // Argument: which function argument
};

struct BufferAnalysis {
  std::vector<ArenaBuffer> buffers;
  llvm::DenseMap<mlir::Value, Placement> placement;
  std::vector<mlir::Operation *> order; // the schedule: op i is step i
  /// Transposes that share their source's bytes, read with permuted strides.
  llvm::DenseSet<mlir::Value> stridedViews;
  /// Fails (with an error on the function) if an in-place update would
  /// overwrite an argument that is still read after it.
  static mlir::FailureOr<BufferAnalysis> analyze(mlir::func::FuncOp func);
  /// The same for a function plan-memory has planned; fails with an error
  /// on the function if it has no plan.
  static mlir::FailureOr<BufferAnalysis>
  analyzePlanned(mlir::func::FuncOp func);
};

/// Bytes a value of this tensor type takes in memory, aligned.
int64_t storageBytes(mlir::Type type);

/// "f32[16,64,512]", as reports and plans print tensor types.
std::string tensorTypeString(mlir::Type type);

/// The step functions the memory passes work on: @train_step and
/// @eval_step, where present.
llvm::SmallVector<mlir::func::FuncOp> stepFunctions(mlir::ModuleOp module);

} // namespace mnemo

#endif // MNEMO_PASSES_BUFFERANALYSIS_H
