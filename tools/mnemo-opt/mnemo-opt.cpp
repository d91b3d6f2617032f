//===- mnemo-opt.cpp - Runs Mnemo passes on .mlir files -------------------===//
//
// The tool lit tests use to run single passes: the mnemo dialect, func, and
// the upstream transforms (canonicalize, cse) plus every Mnemo pass.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoDialect.h"
#include "passes/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  mnemo::registerAllMnemoPasses();
  mlir::DialectRegistry registry;
  registry.insert<mnemo::MnemoDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Mnemo optimizer driver\n", registry));
}
