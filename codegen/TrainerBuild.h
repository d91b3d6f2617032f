//===- TrainerBuild.h - Building a trainer from generated C++ ---*- C++ -*-===//
//
// `mnemoc MODEL.mn -o DIR`: writes DIR/model.cpp and compiles it with the
// system C++ compiler ($CXX, else c++) against the runtime into DIR/train.
// Generated code that does not compile is a bug in mnemoc, and is reported
// as one, with the compiler's output.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_CODEGEN_TRAINERBUILD_H
#define MNEMO_CODEGEN_TRAINERBUILD_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace mnemo {

struct TrainerBuildResult {
  enum class Status { Built, UserError, CompilerBug } status;
  std::string message;
};

/// Writes `source` to DIR/model.cpp and builds DIR/train.
TrainerBuildResult buildTrainer(llvm::StringRef directory,
                                llvm::StringRef source);

} // namespace mnemo

#endif // MNEMO_CODEGEN_TRAINERBUILD_H
