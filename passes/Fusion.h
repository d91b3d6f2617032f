//===- Fusion.h - Which ops are computed inside another op's loop -*- C++ -*-===//
//
// The fuse-elementwise pass marks an elementwise op `mnemo.fused` when its
// only consumer is an elementwise op of the same shape: the backends then
// compute it inside that consumer's loop and never store it. Broadcasts fuse
// the same way (the loop reads their input with stride 0 along the
// broadcast dimensions). Buffer analysis and the backends both ask these
// functions, so what is fused and what is planned cannot disagree.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_FUSION_H
#define MNEMO_PASSES_FUSION_H

namespace mlir {
class Operation;
} // namespace mlir

namespace mnemo {

/// Ops that compute element i of their result from element i of each
/// operand (of the same shape): the ops a fused loop can contain.
bool isElementwiseKernel(mlir::Operation *op);

/// Whether `op` is marked to be computed inside its consumer's loop.
bool isFused(mlir::Operation *op);

/// The op whose loop computes `op`: `op` itself unless it is fused, else its
/// consumer's root.
mlir::Operation *fusionRoot(mlir::Operation *op);

} // namespace mnemo

#endif // MNEMO_PASSES_FUSION_H
