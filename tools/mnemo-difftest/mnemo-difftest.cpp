//===- mnemo-difftest.cpp - Differential testing of passes ----------------===//
//
// Runs a pass pipeline on a module and checks, in the reference
// interpreter, that every function computes the same before and after on
// the same random inputs. Every pass's lit test uses it:
//
//   mnemo-difftest model.mlir --pass-pipeline='builtin.module(canonicalize)'
//
// Prints one line per function ("@forward: 2 results agree ...") and exits
// 1 if any function differs.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoDialect.h"
#include "lang/interpreter/Differential.h"
#include "passes/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"

#include <cmath>

using namespace mlir;
namespace cl = llvm::cl;

// Its own options only in --help: LLVM's hundreds of code generation flags
// do nothing here.
static cl::OptionCategory category("mnemo-difftest options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input.mlir>"),
                                      cl::init("-"), cl::cat(category));
static cl::opt<std::string> pipeline("pass-pipeline",
                                     cl::desc("The passes to check"),
                                     cl::Required, cl::cat(category));
static cl::opt<uint64_t> seed("seed", cl::desc("Seed of the random inputs"),
                              cl::init(1), cl::cat(category));
static cl::opt<unsigned> trials("trials",
                                cl::desc("How many random inputs to try"),
                                cl::init(3), cl::cat(category));
static cl::opt<bool>
    arena("arena",
          cl::desc("Run planned functions of the result in the "
                   "interpreter's arena mode"),
          cl::cat(category));
static cl::opt<double> relativeTolerance("rtol", cl::desc("Relative tolerance"),
                                         cl::init(1e-5), cl::cat(category));
static cl::opt<double> absoluteTolerance("atol", cl::desc("Absolute tolerance"),
                                         cl::init(1e-6), cl::cat(category));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerTransformsPasses();
  mnemo::registerAllMnemoPasses();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "mnemo-difftest: check passes by execution\n");
  // A check that cannot fail is no check: no trials, or a tolerance that
  // is negative, NaN or infinite (every comparison passes or none does).
  if (trials == 0) {
    llvm::errs() << "mnemo-difftest: error: --trials must be at least 1\n";
    return 1;
  }
  for (auto [name, value] : {std::pair{"--rtol", relativeTolerance.getValue()},
                             {"--atol", absoluteTolerance.getValue()}})
    if (!(value >= 0 && std::isfinite(value))) {
      llvm::errs() << "mnemo-difftest: error: " << name
                   << " must be a finite number of at least 0\n";
      return 1;
    }

  DialectRegistry registry;
  registry.insert<mnemo::MnemoDialect, func::FuncDialect>();
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  auto buffer = openInputFile(inputFile, &error);
  if (!buffer) {
    llvm::errs() << "mnemo-difftest: error: " << error << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  OwningOpRef<ModuleOp> before = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!before)
    return 1;
  OwningOpRef<ModuleOp> after = before->clone();
  PassManager pm(&context);
  llvm::raw_string_ostream errors(error);
  if (failed(parsePassPipeline(pipeline, pm, errors))) {
    llvm::errs() << "mnemo-difftest: error: " << errors.str() << "\n";
    return 1;
  }
  if (failed(pm.run(*after)))
    return 1;

  bool ok = true;
  std::map<std::string, mnemo::DifferentialResult> summary;
  for (unsigned t = 0; t < trials; ++t)
    for (const mnemo::DifferentialResult &r :
         mnemo::compareModules(*before, *after, seed + t, relativeTolerance,
                               absoluteTolerance, arena)) {
      auto &s = summary[r.function];
      if (s.function.empty())
        s = r;
      s.worstRelativeDifference =
          std::max(s.worstRelativeDifference, r.worstRelativeDifference);
      if (!r.ok && s.ok) {
        s.ok = false;
        s.message = r.message;
      }
    }
  for (auto &[name, r] : summary) {
    if (r.ok)
      llvm::outs() << llvm::format(
          "@%s: %u results agree on %u random inputs (worst relative "
          "difference %.3g)\n",
          name.c_str(), r.results, unsigned(trials), r.worstRelativeDifference);
    else
      llvm::outs() << "@" << name << ": DIFFERS: " << r.message << "\n";
    ok &= r.ok;
  }
  if (summary.empty())
    llvm::outs()
        << "mnemo-difftest: no function is defined both before and after\n";
  return ok && !summary.empty() ? 0 : 1;
}
