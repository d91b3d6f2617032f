//===- PlanAttributes.h - The memory plan in the IR -------------*- C++ -*-===//
//
// The one library through which the memory plan is written and read: the
// dialect attributes of lang/MnemoAttrs.td, where they sit (which op,
// function or argument), and the marks of fusion and recomputation. No
// other file spells a "mnemo.*" plan attribute; the verifiers hold every
// read here to what the planner wrote.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_PLANATTRIBUTES_H
#define MNEMO_LANG_PLANATTRIBUTES_H

#include "runtime/MemoryRegion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include <optional>

namespace mnemo {
/// The plan attributes' parameters in the IR: a MemoryRegion
/// (`parameters`, `optimizer_state`, ...), an integer list (`[1, 2, 3]`)
/// and a flag (`true` or `false`).
mlir::FailureOr<MemoryRegion> parseMemoryRegion(mlir::AsmParser &parser);
mlir::FailureOr<llvm::SmallVector<int64_t>>
parseIntegerList(mlir::AsmParser &parser);
void printIntegerList(mlir::AsmPrinter &printer, llvm::ArrayRef<int64_t> list);
mlir::FailureOr<bool> parseFlag(mlir::AsmParser &parser);
} // namespace mnemo

#define GET_ATTRDEF_CLASSES
#include "lang/MnemoAttrs.h.inc"

namespace mnemo::plan {

//===--- Step functions ---------------------------------------------------===//

/// The step's plan (null before plan-memory).
StepPlanAttr stepPlan(mlir::func::FuncOp func);
void setStepPlan(mlir::func::FuncOp func, StepPlanAttr plan);

/// What remat did to the step (null when it did not run under a budget or
/// a policy).
RematAttr remat(mlir::func::FuncOp func);
void setRemat(mlir::func::FuncOp func, RematAttr remat);

/// A data-parallel step's gradient buckets (null: one rank).
GradientBucketsAttr gradientBuckets(mlir::func::FuncOp func);
void setGradientBuckets(mlir::func::FuncOp func, GradientBucketsAttr buckets);

/// Where argument `index` lives (null before plan-memory).
SlotAttr slot(mlir::func::FuncOp func, unsigned index);
/// Every argument's slot at once (one per argument; setting them one by
/// one rebuilds the attribute list each time).
void setSlots(mlir::func::FuncOp func, llvm::ArrayRef<SlotAttr> slots);

/// The argument that result `index` of the step is written back into
/// (updated parameters and optimizer state), as autodiff declares it.
std::optional<unsigned> reusedArgument(mlir::func::FuncOp func, unsigned index);
void setReusedArgument(mlir::func::FuncOp func, unsigned index,
                       unsigned argument);
/// The attribute that setReusedArgument writes, for building result
/// attribute dictionaries.
mlir::NamedAttribute reusedArgumentAttr(mlir::Builder &builder,
                                        unsigned argument);

/// Succeeds when the step carries a whole plan: its step plan, every
/// argument's slot, and every op's placement (one offset and size per
/// result, inside the arena). Everything that reads a plan (the report, the
/// plan JSON, the timeline, both emitters, the interpreter's arena mode)
/// checks this first, so an unplanned or hand-edited module is an error
/// naming what is missing.
mlir::LogicalResult checkPlanned(mlir::func::FuncOp func);

//===--- Ops --------------------------------------------------------------===//

/// Where the op's results live (null before plan-memory).
PlacementAttr placement(mlir::Operation *op);
void setPlacement(mlir::Operation *op, PlacementAttr placement);

/// The arena offset of result `index` of a planned op (-1: not in the
/// arena, or not planned).
int64_t arenaOffset(mlir::Operation *op, unsigned index);

/// Whether `v` is stored in blocks of channels on the CPU (the first
/// result of an op whose placement says channel_blocked; never an
/// argument).
bool isChannelBlocked(mlir::Value v);

/// The gradient buckets whose sums start after the op and those awaited
/// before it (null: none).
GradientSyncAttr gradientSync(mlir::Operation *op);
void setGradientSync(mlir::Operation *op, GradientSyncAttr sync);

/// fuse-attention's mark: the attention op replaced a written-out
/// softmax(q @ k^T ...) @ v (the memory report lists where).
bool isRewrittenAttention(mlir::Operation *op);
void markRewrittenAttention(mlir::Operation *op);

/// fuse-elementwise's mark: the op is computed inside its consumer's loop.
bool isFused(mlir::Operation *op);
void markFused(mlir::Operation *op);

/// remat's mark: the op is a clone that recomputes a forward value in the
/// backward.
bool isRecomputed(mlir::Operation *op);
void markRecomputed(mlir::Operation *op);

} // namespace mnemo::plan

#endif // MNEMO_LANG_PLANATTRIBUTES_H
