//===- Fusion.h - Which ops compute inside another op's loop ----*- C++ -*-===//
//
// The fuse-elementwise pass marks an elementwise op `mnemo.fused` when its
// only consumer is an elementwise op of the same shape: the backends then
// compute it inside that consumer's loop and never store it. Broadcasts fuse
// the same way (the loop reads their input with stride 0 along the
// broadcast dimensions), into any number of consumers: re-reading costs
// nothing, storing costs memory. Buffer analysis and the backends both ask
// these functions, so what is fused and what is planned cannot disagree.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_FUSION_H
#define MNEMO_PASSES_FUSION_H

#include "llvm/ADT/SmallVector.h"

namespace mlir {
class Operation;
} // namespace mlir

namespace mnemo {

/// Ops that compute element i of their result from element i of each
/// operand (of the same shape): the ops a fused loop can contain, as their
/// definitions declare (the FusionElementwise trait, MnemoInterfaces.td).
bool isElementwiseKernel(mlir::Operation *op);

/// Whether `op` is marked to be computed inside its consumer's loop.
bool isFused(mlir::Operation *op);

/// The ops whose loops compute `op`: `op` itself unless it is fused, else
/// its consumers' roots (a fused broadcast may feed several loops).
void fusionRoots(mlir::Operation *op,
                 llvm::SmallVectorImpl<mlir::Operation *> &roots);

} // namespace mnemo

#endif // MNEMO_PASSES_FUSION_H
