//===- ModelDriver.h - From a model file to a planned module ----*- C++ -*-===//
//
// The one path the tools take from a .mn file to planned IR: the flags that
// name the model (-I, -D, --model) and set the pipeline (PipelineOptions,
// one flag per field), the import search path, then MLIRGen and the
// pipeline. mnemoc, its studies (--fit-batch, --remat-curve) and
// mnemo-interp all go through here, so they compile a model alike.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_TOOLS_DRIVER_MODELDRIVER_H
#define MNEMO_TOOLS_DRIVER_MODELDRIVER_H

#include "frontend/Graph.h"
#include "frontend/Sema.h"
#include "passes/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/CommandLine.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mnemo {

class Diagnostics;

/// The category of the model and pipeline flags, for --help.
llvm::cl::OptionCategory &modelFlagsCategory();

/// Where imports are searched: the -I folders, then $MNEMO_PATH's, then the
/// standard library.
std::vector<std::string> modelSearchPaths();

/// --model and the -D overrides, into `options`; false after an error (a
/// -D that is not name=value).
bool readModelFlags(ElaborateOptions &options, Diagnostics &diags);

/// The pipeline's options from its flags; nullopt after an error message
/// that starts with `tool`.
std::optional<PipelineOptions> readPipelineFlags(llvm::StringRef tool);

/// --memory-budget as the user wrote it ("" when not given).
std::string memoryBudgetFlag();

/// Whether --remat-time-limit was given (studies default to a shorter one).
bool rematTimeLimitGiven();

/// Makes a pass's error that blames a flag (its location a NameLoc
/// "--memory-budget") print as the tool's own flag errors do: the flag as
/// given, then why.
void reportFlagDiagnostics(mlir::MLIRContext &context, llvm::StringRef tool);

/// "512MiB", "2GB", "1.5GiB" or plain bytes.
std::optional<int64_t> parseSize(llvm::StringRef text);

/// How a tool may adjust the pipeline: `build` adds its passes instead of
/// the default pipeline (mnemoc --pass-pipeline); `configure` sets up the
/// pass manager (timing, IR printing) once the passes are in.
struct PipelineHooks {
  std::function<mlir::LogicalResult(mlir::OpPassManager &)> build;
  std::function<mlir::LogicalResult(mlir::PassManager &)> configure;
};

/// A model lowered to IR: the module (also after a failed pass, so that its
/// marks can be read) and how far it got.
struct LoweredModel {
  enum class Status { Planned, GenerationFailed, PipelineFailed };
  Status status = Status::GenerationFailed;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  bool planned() const { return status == Status::Planned; }
};

/// MLIRGen of `graph`, then the default pipeline built from `options` (or
/// what `hooks` build).
LoweredModel lowerModel(mlir::MLIRContext &context, const Graph &graph,
                        const PipelineOptions &options,
                        const PipelineHooks &hooks = {});

} // namespace mnemo

#endif // MNEMO_TOOLS_DRIVER_MODELDRIVER_H
