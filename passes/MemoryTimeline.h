//===- MemoryTimeline.h - A picture of the arena over one step --*- C++ -*-===//
//
// Draws a planned step function's arena as SVG: x is the op index, y the
// offset, one box per buffer coloured by kind, the peak marked, and a hover
// title on each box naming the buffer (layer, op, type, size, location,
// lifetime). `mnemoc --memory-timeline=FILE.svg` writes it.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_MEMORYTIMELINE_H
#define MNEMO_PASSES_MEMORYTIMELINE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/Support/raw_ostream.h"

namespace mnemo {

/// Writes the SVG; fails with an error on `func` if it has no memory plan.
mlir::LogicalResult writeMemoryTimeline(mlir::func::FuncOp func,
                                        llvm::StringRef title,
                                        llvm::raw_ostream &os);

} // namespace mnemo

#endif // MNEMO_PASSES_MEMORYTIMELINE_H
