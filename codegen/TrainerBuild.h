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

/// True when the runtime mnemoc links was built with the CUDA backend:
/// trainers then include the model's CUDA steps.
bool runtimeHasCuda();

/// Writes `source` to DIR/model.cpp (and `cudaSource`, when the runtime has
/// the CUDA backend, to DIR/model_cuda.cpp) and builds DIR/train, or
/// DIR/infer for an inference plan (runtime/Infer.cpp's main).
TrainerBuildResult buildTrainer(llvm::StringRef directory,
                                llvm::StringRef source,
                                llvm::StringRef cudaSource,
                                bool inference = false);

/// `mnemoc MODEL.mn --emit=project -o DIR`: writes DIR/model.cpp,
/// DIR/model_cuda.cpp, a copy of the runtime's sources (DIR/runtime/) and a
/// DIR/CMakeLists.txt that builds DIR/build/train with CMake, a C++
/// compiler, OpenBLAS, zlib and nlohmann-json alone, plus the CUDA toolkit
/// and cuDNN for the GPU backend when they are there: no LLVM, no MLIR, no
/// mnemoc. For an inference plan the program is DIR/build/infer. On success
/// `message` is the directory.
TrainerBuildResult writeProject(llvm::StringRef directory,
                                llvm::StringRef source,
                                llvm::StringRef cudaSource,
                                llvm::StringRef modelName,
                                bool inference = false);

} // namespace mnemo

#endif // MNEMO_CODEGEN_TRAINERBUILD_H
