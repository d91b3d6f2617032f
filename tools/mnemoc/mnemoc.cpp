//===- mnemoc.cpp - The Mnemo compiler driver -----------------------------===//
//
// One linear pipeline, stoppable at any stage with --emit:
//
//   model file --parse--> AST --Sema--> Graph --MLIRGen--> mnemo dialect
//              --passes--> output
//
// Exit status: 0 on success, 1 when the input is wrong (the diagnostics say
// why), 2 on an internal error (a bug in mnemoc).
//
//===----------------------------------------------------------------------===//

#include "codegen/CppEmitter.h"
#include "codegen/CudaEmitter.h"

#include "RematStudies.h"
#include "codegen/TrainerBuild.h"
#include "frontend/AST.h"
#include "frontend/Diagnostics.h"
#include "frontend/Graph.h"
#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"
#include "frontend/Program.h"
#include "frontend/Sema.h"
#include "lang/ModelAttributes.h"
#include "lang/ShapeRules.h"
#include "passes/MemoryReport.h"
#include "passes/MemoryTimeline.h"
#include "passes/Pipeline.h"
#include "passes/PlanExport.h"
#include "runtime/OutputFiles.h"
#include "tools/driver/ModelDriver.h"
#include <optional>
#include <set>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mnemo;
namespace cl = llvm::cl;

namespace {
enum class Emit {
  AST,
  MLIR,
  Params,
  Plan,
  Cpp,
  Cuda,
  CudaKernels,
  Trainer,
  Project
};

cl::OptionCategory category("mnemoc options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mn>"),
                               cl::init("-"), cl::cat(category));
cl::opt<std::string>
    outputFile("o", cl::desc("Write the output here (default: stdout)"),
               cl::value_desc("file"), cl::init("-"), cl::cat(category));
cl::opt<Emit>
    emit("emit", cl::desc("What to produce"), cl::init(Emit::MLIR),
         cl::values(clEnumValN(Emit::AST, "ast", "the syntax tree"),
                    clEnumValN(Emit::MLIR, "mlir", "the mnemo dialect IR"),
                    clEnumValN(Emit::Params, "params",
                               "the parameters, their shapes and the count"),
                    clEnumValN(Emit::Plan, "plan",
                               "the memory plan as JSON (docs/memory.md)"),
                    clEnumValN(Emit::Cpp, "cpp",
                               "the CPU backend's C++ for the planned steps"),
                    clEnumValN(Emit::Cuda, "cuda",
                               "the CUDA backend's host C++ for the planned "
                               "steps, with their kernels"),
                    clEnumValN(Emit::CudaKernels, "cuda-kernels",
                               "the CUDA kernels alone, as NVRTC compiles "
                               "them"),
                    clEnumValN(Emit::Trainer, "trainer",
                               "a trainer program: -o DIR gets DIR/train "
                               "(the default when -o names a directory)"),
                    clEnumValN(Emit::Project, "project",
                               "a source tree, -o DIR, that builds the "
                               "trainer with CMake and a C++ compiler alone")),
         cl::cat(category));
enum class Mode { Train, Inference };
cl::opt<Mode> mode(
    "mode", cl::desc("What the program does"), cl::init(Mode::Train),
    cl::values(clEnumValN(Mode::Train, "train",
                          "train the model (the default): forward, backward "
                          "and optimizer"),
               clEnumValN(Mode::Inference, "inference",
                          "evaluate it, forward only, on weights that "
                          "`train --export` wrote: int8/int4 with scales, "
                          "2:4-packed or CSR as the file's quantize and prune "
                          "directives (and --quantize, --prune) say")),
    cl::cat(category));
cl::opt<std::string> rematCurve(
    "remat-curve",
    cl::desc("Write an SVG of recomputed FLOPs against the planned peak for "
             "each rematerialization strategy (optimal's MILPs each run "
             "under --remat-time-limit)"),
    cl::value_desc("file.svg"), cl::cat(category));
cl::opt<bool> fitBatchOption(
    "fit-batch",
    cl::desc("Report the largest batch whose planned step fits "
             "--memory-budget, for each rematerialization strategy "
             "(optimal's MILPs each run under --remat-time-limit)"),
    cl::cat(category));
cl::opt<std::string> memoryTimeline(
    "memory-timeline",
    cl::desc("Draw the arena of @train_step over one step into this SVG file"),
    cl::value_desc("file.svg"), cl::cat(category));
enum class ReportFormat { None, Table, Json };
cl::opt<ReportFormat> memoryReport(
    "memory-report",
    cl::desc("Print where the bytes of one step go, instead of the IR"),
    cl::ValueOptional, cl::init(ReportFormat::None),
    cl::values(clEnumValN(ReportFormat::Table, "",
                          "a readable table (the default)"),
               clEnumValN(ReportFormat::Table, "table", "a readable table"),
               clEnumValN(ReportFormat::Json, "json",
                          "JSON, for tools (docs/memory.md)")),
    cl::cat(category));
cl::list<std::string> pruneDirectives(
    "prune",
    cl::desc("Add a prune directive to the train section, as in the file: "
             "--prune='fc1.weight = magnitude(sparsity = 0.5)'"),
    cl::value_desc("pattern=method(...)"), cl::cat(category));
cl::list<std::string> quantizeDirectives(
    "quantize",
    cl::desc("Add a quantize directive to the train section, as in the file: "
             "--quantize='fc1.weight = qat(bits = 8)'; or int8 / int4 alone: "
             "post-training quantization of every weight matrix and "
             "convolution the file does not quantize (int8 per output "
             "channel; int4 per group of 32, 16 or per channel, as the rows "
             "allow)"),
    cl::value_desc("pattern=scheme(...) | int8 | int4"), cl::cat(category));
cl::opt<std::string>
    passPipeline("pass-pipeline",
                 cl::desc("Run this textual pass pipeline instead of the "
                          "default one (for experts)"),
                 cl::value_desc("pipeline"), cl::cat(category));
cl::opt<bool> printIRAfterAll("print-ir-after-all",
                              cl::desc("Print the IR after every pass"),
                              cl::cat(category));
cl::list<std::string>
    printIRAfter("print-ir-after",
                 cl::desc("Print the IR after the named pass"),
                 cl::value_desc("pass"), cl::CommaSeparated, cl::cat(category));
cl::list<std::string> printIRBefore(
    "print-ir-before", cl::desc("Print the IR before the named pass"),
    cl::value_desc("pass"), cl::CommaSeparated, cl::cat(category));
} // namespace

static void printParams(const Graph &graph, llvm::raw_ostream &os) {
  os << "model " << graph.modelName << " (" << graph.fileName << ")\n";
  if (!graph.hyperParams.empty()) {
    os << "hyper-parameters:";
    for (const Setting &s : graph.hyperParams)
      os << " " << s.key << "=" << s.value.str();
    os << "\n";
  }
  size_t width = 9;
  for (const GraphArg &arg : graph.args)
    width = std::max(width, arg.name.size());
  os << llvm::left_justify("parameter", width) << "  "
     << llvm::left_justify("type", 20) << llvm::right_justify("count", 12)
     << "  init\n";
  int64_t bytes = 0;
  for (const GraphArg &arg : graph.args) {
    if (arg.role != ArgRole::Param)
      continue;
    const TensorType &type = graph.values[arg.value];
    int64_t count = shape::numElements(type.shape).value_or(0);
    bytes += count * (type.dtype == ElementType::F32 ? 4 : 2);
    os << llvm::left_justify(arg.name, width) << "  "
       << llvm::left_justify(type.str(), 20)
       << llvm::right_justify(llvm::formatv("{0:N}", count).str(), 12) << "  "
       << arg.init.str() << "\n";
  }
  os << "total: " << llvm::formatv("{0:N}", graph.parameterCount())
     << " parameters, " << llvm::format("%.2f", double(bytes) / (1 << 20))
     << " MiB\n";
}

/// `--quantize=int8|int4`: one post-training directive for each f32
/// parameter of rank >= 2 (weight matrices, convolution kernels) that no
/// directive of the file quantizes. int4 takes groups of 32 (or 16) along
/// the rows where they divide them, else one range per output channel.
static bool addWholeModelQuantization(const Program &program,
                                      ElaborateOptions &options,
                                      const std::string &bits,
                                      llvm::SourceMgr &sourceMgr,
                                      Diagnostics &diags,
                                      std::vector<StmtPtr> &directives) {
  std::optional<Graph> graph = elaborate(program, options, diags);
  if (!graph || diags.hadError())
    return false;
  std::set<std::string> quantized;
  for (const Setting &s : graph->train)
    if (s.key == "quantize")
      if (const ConfigValue *params = s.value.arg("params"))
        for (const ConfigValue &p : params->list)
          quantized.insert(p.text);
  size_t added = 0;
  for (const GraphArg &arg : graph->args) {
    const TensorType &type = graph->values[arg.value];
    if (arg.role != ArgRole::Param || type.shape.size() < 2 ||
        type.dtype != ElementType::F32 || quantized.count(arg.name))
      continue;
    std::string scheme = "int8(per_channel)";
    if (bits == "int4") {
      int64_t row = shape::rowLength(type.shape);
      scheme = row % 32 == 0   ? "int4(per_group, group = 32)"
               : row % 16 == 0 ? "int4(per_group, group = 16)"
                               : "int4(per_channel)";
    }
    std::string text = "quantize " + arg.name + " = " + scheme + "\n";
    unsigned buffer = sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(text, "<--quantize=" + bits + ">"),
        llvm::SMLoc());
    StmtPtr directive = Parser(buffer, diags).parseDirectiveOnly();
    if (!directive)
      return false;
    options.directives.push_back(directive.get());
    directives.push_back(std::move(directive));
    ++added;
  }
  if (quantized.empty() && added == 0) {
    diags.error("--quantize=" + bits +
                ": the model has no weight matrix or "
                "convolution to quantize");
    return false;
  }
  return true;
}

/// The passes a pass manager runs, nested ones included, by argument: read
/// from its textual form, "builtin.module(amp{...},func.func(cse))", where a
/// name before "(" anchors a nested pipeline and "{...}" holds options.
static std::vector<std::string> passArguments(mlir::OpPassManager &pm) {
  std::string text;
  llvm::raw_string_ostream os(text);
  pm.printAsTextualPipeline(os);
  std::vector<std::string> names;
  std::string name;
  int braces = 0;
  for (char c : os.str()) {
    if (c == '{' || c == '}') {
      braces += c == '{' ? 1 : -1;
      continue;
    }
    if (braces > 0)
      continue;
    if (c == '(' || c == ')' || c == ',') {
      if (c != '(' && !name.empty())
        names.push_back(name);
      name.clear();
      continue;
    }
    if (!llvm::isSpace(c))
      name += c;
  }
  if (!name.empty())
    names.push_back(name);
  return names;
}

/// MLIRGen and the default pipeline (built from `options`) or
/// --pass-pipeline, with --mlir-timing and IR printing as asked; an unknown
/// pass name in --print-ir-after/--print-ir-before is an error that lists
/// the pipeline's passes (`userError` set for it).
static LoweredModel runPipeline(mlir::MLIRContext &context, const Graph &graph,
                                const PipelineOptions &options,
                                bool &userError) {
  // --mlir-timing: time per pass (the benchmarks read the planners' time).
  mlir::DefaultTimingManager timingManager;
  mlir::applyDefaultTimingManagerCLOptions(timingManager);
  mlir::TimingScope timing = timingManager.getRootScope();
  PipelineHooks hooks;
  if (passPipeline.getNumOccurrences())
    hooks.build = [](mlir::OpPassManager &pm) -> mlir::LogicalResult {
      if (passPipeline.empty())
        return mlir::success(); // the IR exactly as MLIRGen built it
      std::string errors;
      llvm::raw_string_ostream errorStream(errors);
      if (succeeded(mlir::parsePassPipeline(passPipeline, pm, errorStream)))
        return mlir::success();
      llvm::errs() << "mnemoc: error: invalid --pass-pipeline: "
                   << errorStream.str() << "\n";
      return mlir::failure();
    };
  hooks.configure = [&](mlir::PassManager &pm) -> mlir::LogicalResult {
    if (failed(mlir::applyPassManagerCLOptions(pm)))
      return mlir::failure();
    pm.enableTiming(timing);
    std::vector<std::string> names = passArguments(pm);
    for (bool after : {true, false})
      for (const std::string &name : after ? printIRAfter : printIRBefore)
        if (std::find(names.begin(), names.end(), name) == names.end()) {
          llvm::errs() << "mnemoc: error: --print-ir-"
                       << (after ? "after" : "before") << "=" << name
                       << ": the pipeline has no pass '" << name
                       << "'; its passes: " << llvm::join(names, ", ") << "\n";
          userError = true;
          return mlir::failure();
        }
    if (printIRAfterAll || !printIRAfter.empty() || !printIRBefore.empty()) {
      auto matches = [](const cl::list<std::string> &names, mlir::Pass *pass) {
        for (const std::string &name : names)
          if (pass->getArgument() == name || pass->getName() == name)
            return true;
        return false;
      };
      pm.getContext()->disableMultithreading();
      pm.enableIRPrinting(
          [&](mlir::Pass *pass, mlir::Operation *) {
            return matches(printIRBefore, pass);
          },
          [&](mlir::Pass *pass, mlir::Operation *) {
            return printIRAfterAll || matches(printIRAfter, pass);
          },
          /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
          /*printAfterOnlyOnFailure=*/false, llvm::errs());
    }
    return mlir::success();
  };
  return lowerModel(context, graph, options, hooks);
}

/// -o, --memory-timeline and --remat-curve write into an existing
/// directory, as compilers do (a typo in a path must not create a tree),
/// each to a file of its own, and never over an input: the model file,
/// an imported one, the AMP policy (compared as the trainer compares its
/// outputs, links included). `inputs`: what each is ("the model file"),
/// and its path.
static mlir::LogicalResult
checkOutputPaths(const std::vector<std::pair<std::string, std::string>> &inputs,
                 Diagnostics &diags) {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (outputFile.getNumOccurrences())
    outputs.emplace_back("-o", outputFile);
  outputs.emplace_back("--memory-timeline", memoryTimeline);
  outputs.emplace_back("--remat-curve", rematCurve);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[option, path] = outputs[i];
    if (path.empty() || path == "-")
      continue;
    llvm::SmallString<256> whole(path);
    llvm::sys::fs::make_absolute(whole);
    llvm::StringRef parent = llvm::sys::path::parent_path(whole);
    if (!parent.empty() && !llvm::sys::fs::is_directory(parent)) {
      diags.error(option + " " + path + ": the directory '" +
                  llvm::sys::path::parent_path(path).str() +
                  "' does not exist");
      return mlir::failure();
    }
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].second.empty() && outputs[j].second != "-" &&
          runtime::namesSameFile(path, outputs[j].second)) {
        diags.error(option + " " + path + " is also " + outputs[j].first +
                    "'s file; each output needs a file of its own");
        return mlir::failure();
      }
    for (const auto &[what, input] : inputs)
      if (!input.empty() && input != "-" &&
          runtime::namesSameFile(path, input)) {
        diags.error(option + " " + path + " is " + what +
                    "; writing it would destroy it");
        return mlir::failure();
      }
  }
  return mlir::success();
}

/// --prune and --quantize: parsed as the directive they spell, from a
/// buffer of their own, so errors point into the option's text. The
/// directives go into `options` (owned by `owned`); --quantize=int8|int4,
/// the whole model, is returned as its bits, expanded once the parameters
/// are known.
static std::string readCommandLineDirectives(llvm::SourceMgr &sourceMgr,
                                             Diagnostics &diags,
                                             ElaborateOptions &options,
                                             std::vector<StmtPtr> &owned) {
  std::string wholeModelBits;
  for (const char *kind : {"prune", "quantize"}) {
    bool quantize = std::string(kind) == "quantize";
    for (const std::string &text :
         quantize ? quantizeDirectives : pruneDirectives) {
      llvm::StringRef trimmed = llvm::StringRef(text).trim();
      if (quantize && (trimmed == "int8" || trimmed == "int4")) {
        wholeModelBits = trimmed.str();
        continue;
      }
      unsigned buffer = sourceMgr.AddNewSourceBuffer(
          llvm::MemoryBuffer::getMemBufferCopy(std::string(kind) + " " + text +
                                                   "\n",
                                               std::string("<--") + kind + ">"),
          llvm::SMLoc());
      if (StmtPtr directive = Parser(buffer, diags).parseDirectiveOnly()) {
        options.directives.push_back(directive.get());
        owned.push_back(std::move(directive));
      }
    }
  }
  return wholeModelBits;
}

/// --remat-curve and --fit-batch: studies that compile the model many
/// times. The exit status.
static int runStudies(Program &program, const ElaborateOptions &options,
                      PipelineOptions pipeline, Diagnostics &diags) {
  if (mode == Mode::Inference) {
    diags.error(std::string(fitBatchOption ? "--fit-batch" : "--remat-curve") +
                " studies the training step; it does not apply with "
                "--mode=inference");
    return 1;
  }
  std::string error;
  // A study solves one MILP per budget or batch it tries for optimal;
  // unless told otherwise, each gets kStudyMilpSeconds, not a step's 60.
  constexpr double kStudyMilpSeconds = 6;
  if (!rematTimeLimitGiven())
    pipeline.rematTimeLimit = kStudyMilpSeconds;
  if (!rematCurve.empty()) {
    if (!writeRematCurve(program, options, pipeline, rematCurve, error)) {
      diags.error(error);
      return 1;
    }
    llvm::outs() << "mnemoc: wrote " << rematCurve << "\n";
  }
  if (fitBatchOption) {
    if (pipeline.memoryBudget <= 0) {
      diags.error("--fit-batch needs --memory-budget=SIZE");
      return 1;
    }
    if (!fitBatch(program, options, pipeline, pipeline.memoryBudget,
                  llvm::outs(), error)) {
      diags.error(error);
      return 1;
    }
  }
  return 0;
}

/// A forward-only plan recomputes nothing: a budget it exceeds is an error
/// naming what it needs.
static mlir::LogicalResult checkInferenceBudget(mlir::ModuleOp module,
                                                int64_t budget,
                                                Diagnostics &diags) {
  auto eval = module.lookupSymbol<mlir::func::FuncOp>("eval_step");
  if (!eval)
    return mlir::success();
  mlir::FailureOr<MemoryReport> report = buildMemoryReport(eval);
  if (failed(report) || report->peakBytes <= budget)
    return mlir::success();
  diags.error(llvm::formatv("--memory-budget={0}: the inference plan needs "
                            "{1} bytes (weights, one batch, the arena and "
                            "the workspace), and a forward-only plan has "
                            "nothing to recompute; {1} bytes is the "
                            "smallest budget it fits",
                            memoryBudgetFlag(), report->peakBytes)
                  .str());
  return mlir::failure();
}

/// --memory-timeline: the step's buffers over time as an SVG. The exit
/// status on failure.
static std::optional<int> drawMemoryTimeline(mlir::ModuleOp module,
                                             const Graph &graph,
                                             Diagnostics &diags) {
  auto step = module.lookupSymbol<mlir::func::FuncOp>(
      mode == Mode::Inference ? "eval_step" : "train_step");
  if (!step) {
    diags.error("'" + inputFile +
                "' has no train section, so there is no step to draw");
    return 1;
  }
  std::string error;
  auto svg = mlir::openOutputFile(memoryTimeline, &error);
  if (!svg) {
    diags.error("cannot write '" + memoryTimeline + "': " + error);
    return 1;
  }
  std::string title = "@" + step.getName().str() + " of " + graph.modelName +
                      " (" + graph.fileName + ")";
  if (mlir::failed(writeMemoryTimeline(step, title, svg->os())))
    return 2;
  svg->keep();
  return std::nullopt;
}

/// --emit=trainer and --emit=project: the generated C++ (and CUDA) built
/// into a trainer, or written as a CMake project. The exit status.
static int writeProgram(mlir::ModuleOp module, const Graph &graph,
                        const std::string &cppSource, Diagnostics &diags) {
  // The CUDA steps come from the same planned IR; a project always gets
  // them (its CMake decides), a trainer when the runtime has CUDA.
  std::string cudaSource;
  if (emit == Emit::Project || runtimeHasCuda()) {
    mlir::FailureOr<CudaCode> cuda = emitCuda(module, graph.fileName);
    if (mlir::failed(cuda))
      return 1;
    cudaSource = cuda->host;
  }
  TrainerBuildResult built =
      emit == Emit::Project
          ? writeProject(outputFile, cppSource, cudaSource, graph.modelName,
                         mode == Mode::Inference)
          : buildTrainer(outputFile, cppSource, cudaSource,
                         mode == Mode::Inference);
  switch (built.status) {
  case TrainerBuildResult::Status::Built:
    if (emit == Emit::Project)
      llvm::outs() << "mnemoc: wrote " << built.message << " (cmake -S "
                   << built.message << " -B " << built.message
                   << "/build && cmake --build " << built.message
                   << "/build)\n";
    else
      llvm::outs() << "mnemoc: built " << built.message << "\n";
    return 0;
  case TrainerBuildResult::Status::UserError:
    diags.error(built.message);
    return 1;
  case TrainerBuildResult::Status::CompilerBug:
    llvm::errs() << "mnemoc: internal error: " << built.message << "\n";
    return 2;
  }
  llvm_unreachable("every status is handled");
}

/// --memory-report: where every byte of each step goes, as text or JSON.
/// The exit status.
static int writeMemoryReports(mlir::ModuleOp module, const Graph &graph,
                              llvm::raw_ostream &os, Diagnostics &diags) {
  std::vector<MemoryReport> reports;
  for (const char *name : {"train_step", "eval_step"})
    if (auto func = module.lookupSymbol<mlir::func::FuncOp>(name)) {
      mlir::FailureOr<MemoryReport> report = buildMemoryReport(func);
      if (mlir::failed(report))
        return 2;
      reports.push_back(*report);
    }
  if (reports.empty()) {
    diags.error("'" + inputFile +
                "' has no train section, so there is no step to report on");
    return 1;
  }
  if (memoryReport == ReportFormat::Json) {
    printMemoryReportJson(reports, os);
    return 0;
  }
  os << "model " << graph.modelName << " (" << graph.fileName << ")\n";
  for (const MemoryReport &report : reports)
    printMemoryReport(report, os);
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  mlir::registerTransformsPasses();
  registerAllMnemoPasses();
  cl::HideUnrelatedOptions({&category, &modelFlagsCategory()});
  cl::ParseCommandLineOptions(argc, argv, "mnemoc: the Mnemo compiler\n");

  llvm::SourceMgr sourceMgr;
  Diagnostics diags(sourceMgr, llvm::errs());

  ElaborateOptions options;
  readModelFlags(options, diags);
  std::vector<StmtPtr> commandLineDirectives;
  std::string wholeModelBits = readCommandLineDirectives(
      sourceMgr, diags, options, commandLineDirectives);
  if (diags.hadError())
    return 1;

  // Option errors first, with exit status 1 like any mistake of the user's.
  std::optional<PipelineOptions> pipeline = readPipelineFlags("mnemoc");
  if (!pipeline)
    return 1;
  pipeline->inference = mode == Mode::Inference;
  if (failed(checkOutputPaths({{"the model file", inputFile},
                               {"the --amp-policy file", pipeline->ampPolicy}},
                              diags)))
    return 1;

  std::unique_ptr<Program> program =
      loadProgramFile(inputFile, modelSearchPaths(), diags);
  if (!program || diags.hadError())
    return 1;
  std::vector<std::pair<std::string, std::string>> imports;
  for (const auto &module : program->modules)
    imports.emplace_back("a file the model imports", module->fileName);
  if (failed(checkOutputPaths(imports, diags)))
    return 1;
  if (!wholeModelBits.empty() &&
      !addWholeModelQuantization(*program, options, wholeModelBits, sourceMgr,
                                 diags, commandLineDirectives))
    return 1;

  // `-o DIR` alone builds a trainer: DIR is a directory, or a new path
  // without an extension (`-o out.mlir` and `-o /dev/null` still get IR).
  if (!emit.getNumOccurrences() && outputFile.getNumOccurrences() &&
      memoryReport == ReportFormat::None && outputFile != "-" &&
      (llvm::sys::fs::is_directory(outputFile) ||
       (!llvm::sys::fs::exists(outputFile) &&
        !llvm::sys::path::has_extension(outputFile))))
    emit = Emit::Trainer;
  bool writesDirectory = emit == Emit::Trainer || emit == Emit::Project;
  if (writesDirectory && outputFile == "-") {
    diags.error(std::string("--emit=") +
                (emit == Emit::Trainer ? "trainer" : "project") +
                " needs -o DIR, the directory to write");
    return 1;
  }

  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output;
  if (!writesDirectory)
    output = mlir::openOutputFile(outputFile, &errorMessage);
  if (!output && !writesDirectory) {
    diags.error("cannot write '" + outputFile + "': " + errorMessage);
    return 1;
  }

  if (emit == Emit::AST) {
    // The main file only; imports are files of their own.
    printAST(program->mainModule(), sourceMgr, output->os());
    output->keep();
    return 0;
  }
  if (!rematCurve.empty() || fitBatchOption)
    return runStudies(*program, options, *pipeline, diags);

  std::optional<Graph> graph = elaborate(*program, options, diags);
  if (!graph || diags.hadError())
    return 1;

  if (emit == Emit::Params) {
    printParams(*graph, output->os());
    output->keep();
    return 0;
  }

  mlir::MLIRContext context;
  // Diagnostics point at the model file; the IR of the op is not for users
  // (--mlir-print-debuginfo and --print-ir-* show it to those who ask).
  context.printOpOnDiagnostic(false);
  // MLIR diagnostics (verifier, passes) print like ours: file:line:col, the
  // source line and a caret.
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  reportFlagDiagnostics(context, "mnemoc");
  bool userError = false;
  LoweredModel lowered = runPipeline(context, *graph, *pipeline, userError);
  if (lowered.status == LoweredModel::Status::GenerationFailed) {
    llvm::errs() << "mnemoc: internal error: the generated IR does not verify; "
                    "please report this with the model file\n";
    return 2;
  }
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(lowered.module);
  if (!lowered.planned())
    return userError || passPipeline.getNumOccurrences() ||
                   model::hasUserError(*module)
               ? 1
               : 2;
  if (mode == Mode::Inference && !memoryBudgetFlag().empty() &&
      failed(checkInferenceBudget(*module, pipeline->memoryBudget, diags)))
    return 1;
  if (!memoryTimeline.empty()) {
    if (std::optional<int> failure = drawMemoryTimeline(*module, *graph, diags))
      return *failure;
    if (memoryReport == ReportFormat::None && !outputFile.getNumOccurrences())
      return 0; // the picture was asked for, not the IR
  }
  if (emit == Emit::Plan) {
    if (mlir::failed(writePlanJson(*module, output->os())))
      return 2;
    output->keep();
    return 0;
  }
  if (emit == Emit::Cuda || emit == Emit::CudaKernels) {
    mlir::FailureOr<CudaCode> cuda = emitCuda(*module, graph->fileName);
    if (mlir::failed(cuda))
      return 1;
    output->os() << (emit == Emit::Cuda ? cuda->host : cuda->kernels);
    output->keep();
    return 0;
  }
  if (emit == Emit::Cpp || writesDirectory) {
    std::string source;
    llvm::raw_string_ostream sourceStream(source);
    if (mlir::failed(emitCpp(*module, graph->fileName, sourceStream)))
      return 1;
    if (writesDirectory)
      return writeProgram(*module, *graph, sourceStream.str(), diags);
    output->os() << sourceStream.str();
    output->keep();
    return 0;
  }
  if (memoryReport != ReportFormat::None) {
    int status = writeMemoryReports(*module, *graph, output->os(), diags);
    if (status == 0)
      output->keep();
    return status;
  }
  module->print(output->os());
  output->keep();
  return 0;
}
