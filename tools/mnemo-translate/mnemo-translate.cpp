//===- mnemo-translate.cpp - The backends' code from a planned module -----===//
//
// MLIR's translation-tool shape (mlirTranslateMain): a planned .mlir (what
// `mnemoc --emit=mlir` prints, or mnemo-opt's output after the pipeline) in,
// the code a backend emits for it out, so that every emitter can be tested
// from IR alone:
//
//   mnemo-translate --mnemo-to-cpp planned.mlir           the CPU step C++
//   mnemo-translate --mnemo-to-cuda planned.mlir          the CUDA host C++
//   mnemo-translate --mnemo-to-cuda-kernels planned.mlir  the NVRTC kernels
//
//===----------------------------------------------------------------------===//

#include "codegen/CppEmitter.h"
#include "codegen/CudaEmitter.h"
#include "lang/MnemoDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

/// The model file the module came from (MLIRGen gives the module its
/// location), for the generated code's header comment.
static std::string sourceFileOf(ModuleOp module) {
  if (auto file = llvm::dyn_cast<FileLineColLoc>(module.getLoc()))
    return file.getFilename().str();
  return "<unknown>";
}

static void registerDialects(DialectRegistry &registry) {
  registry.insert<mnemo::MnemoDialect, func::FuncDialect>();
}

/// One of the CUDA backend's two outputs: the host code or the kernels.
static LogicalResult writeCuda(ModuleOp module, llvm::raw_ostream &os,
                               std::string mnemo::CudaCode::*part) {
  FailureOr<mnemo::CudaCode> cuda =
      mnemo::emitCuda(module, sourceFileOf(module));
  if (failed(cuda))
    return failure();
  os << (*cuda).*part;
  return success();
}

int main(int argc, char **argv) {
  TranslateFromMLIRRegistration toCpp(
      "mnemo-to-cpp", "the CPU backend's C++ for the planned steps",
      [](ModuleOp module, llvm::raw_ostream &os) {
        return mnemo::emitCpp(module, sourceFileOf(module), os);
      },
      registerDialects);
  TranslateFromMLIRRegistration toCuda(
      "mnemo-to-cuda",
      "the CUDA backend's host C++ for the planned steps, with their kernels",
      [](ModuleOp module, llvm::raw_ostream &os) {
        return writeCuda(module, os, &mnemo::CudaCode::host);
      },
      registerDialects);
  TranslateFromMLIRRegistration toCudaKernels(
      "mnemo-to-cuda-kernels", "the CUDA kernels alone, as NVRTC compiles them",
      [](ModuleOp module, llvm::raw_ostream &os) {
        return writeCuda(module, os, &mnemo::CudaCode::kernels);
      },
      registerDialects);
  return failed(mlirTranslateMain(
      argc, argv, "mnemo-translate: the backends' code from a planned module"));
}
