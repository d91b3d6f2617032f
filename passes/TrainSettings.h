//===- TrainSettings.h - Reading the `mnemo.train` dictionary ---*- C++ -*-===//
//
// The train section reaches the passes as a dictionary of checked settings
// (frontend/Settings.cpp fills in every default); these read one entry,
// with a fallback for IR written by hand.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_TRAINSETTINGS_H
#define MNEMO_PASSES_TRAINSETTINGS_H

#include "mlir/IR/BuiltinAttributes.h"

namespace mnemo {

inline double settingNumber(mlir::DictionaryAttr dict, llvm::StringRef key,
                            double fallback) {
  if (!dict)
    return fallback;
  if (auto f = dict.getAs<mlir::FloatAttr>(key))
    return f.getValueAsDouble();
  if (auto i = dict.getAs<mlir::IntegerAttr>(key))
    return double(i.getInt());
  return fallback;
}

inline int64_t settingInt(mlir::DictionaryAttr dict, llvm::StringRef key,
                          int64_t fallback) {
  return int64_t(settingNumber(dict, key, double(fallback)));
}

inline llvm::StringRef settingText(mlir::DictionaryAttr dict,
                                   llvm::StringRef key,
                                   llvm::StringRef fallback) {
  auto s = dict ? dict.getAs<mlir::StringAttr>(key) : mlir::StringAttr();
  return s ? s.getValue() : fallback;
}

} // namespace mnemo

#endif // MNEMO_PASSES_TRAINSETTINGS_H
