//===- SourcePlace.h - Where in the model file an op comes from -*- C++ -*-===//
//
// MLIRGen gives each op a location that names its layer instance (a NameLoc,
// "blocks.3.attn"), wraps the call sites that led to it (CallSiteLoc, the
// model file's outermost), and, inside a `checkpoint` block, a FusedLoc
// carrying the block's number. Passes, reports and emitters read it back
// here.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_SOURCEPLACE_H
#define MNEMO_PASSES_SOURCEPLACE_H

#include "mlir/IR/Location.h"

#include <string>

namespace mnemo {

struct SourcePlace {
  /// The layer instance path, innermost; "" for the model's own ops.
  std::string layer;
  /// The outermost call site in the model file; file empty when unknown.
  std::string file;
  unsigned line = 0, column = 0;
};

SourcePlace sourcePlaceOf(mlir::Location loc);

} // namespace mnemo

#endif // MNEMO_PASSES_SOURCEPLACE_H
