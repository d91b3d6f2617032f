//===- SourcePlace.cpp - Where in the model file an op comes from ---------===//

#include "passes/SourcePlace.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <functional>

using namespace mlir;

mnemo::SourcePlace mnemo::sourcePlaceOf(Location loc) {
  SourcePlace place;
  std::function<void(Location)> visit = [&](Location l) {
    if (auto name = llvm::dyn_cast<NameLoc>(l)) {
      if (place.layer.empty())
        place.layer = name.getName().str();
      visit(name.getChildLoc());
    } else if (auto call = llvm::dyn_cast<CallSiteLoc>(l)) {
      visit(call.getCaller());
    } else if (auto file = llvm::dyn_cast<FileLineColLoc>(l)) {
      if (place.file.empty()) {
        place.file = file.getFilename().str();
        place.line = file.getLine();
        place.column = file.getColumn();
      }
    } else if (auto fused = llvm::dyn_cast<FusedLoc>(l)) {
      for (Location inner : fused.getLocations())
        visit(inner);
    }
  };
  visit(loc);
  return place;
}
