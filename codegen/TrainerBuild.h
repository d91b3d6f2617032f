//===- TrainerBuild.h - Building a trainer from generated C++ ---*- C++ -*-===//
//
// `mnemoc MODEL.mn -o DIR`: writes DIR/model.cpp and compiles it with the
// system C++ compiler ($CXX, else c++) against the runtime into DIR/train.
// Generated code that does not compile is a bug in mnemoc, and is reported
// as one, with the compiler's output. `--emit=project` writes a source tree
// that builds elsewhere instead.
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

/// `mnemoc MODEL.mn --emit=project -o DIR`: writes DIR/model.cpp, a copy of
/// the runtime's sources (DIR/runtime/) and a DIR/CMakeLists.txt that builds
/// DIR/build/train with CMake, a C++ compiler, OpenBLAS, zlib and
/// nlohmann-json alone: no LLVM, no MLIR, no mnemoc. On success `message`
/// is the directory.
TrainerBuildResult writeProject(llvm::StringRef directory,
                                llvm::StringRef source,
                                llvm::StringRef modelName);

} // namespace mnemo

#endif // MNEMO_CODEGEN_TRAINERBUILD_H
