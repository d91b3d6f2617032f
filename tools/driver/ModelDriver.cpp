//===- ModelDriver.cpp - From a model file to a planned module ------------===//

#include "ModelDriver.h"

#include "frontend/Diagnostics.h"
#include "frontend/MLIRGen.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

using namespace mnemo;
namespace cl = llvm::cl;

cl::OptionCategory &mnemo::modelFlagsCategory() {
  static cl::OptionCategory category("model and pipeline options");
  return category;
}

namespace {
cl::list<std::string>
    defines("D", cl::Prefix,
            cl::desc("Override a model hyper-parameter: -D layers=12"),
            cl::value_desc("name=value"), cl::cat(modelFlagsCategory()));
cl::list<std::string> importPaths("I", cl::Prefix,
                                  cl::desc("Search this folder for imports"),
                                  cl::value_desc("dir"),
                                  cl::cat(modelFlagsCategory()));
cl::opt<std::string>
    modelName("model",
              cl::desc("The model to compile, when the file has several"),
              cl::value_desc("name"), cl::cat(modelFlagsCategory()));
cl::opt<std::string> precision(
    "precision",
    cl::desc("Mixed precision: bf16, fp16 or fp32 (default: the train "
             "section's precision)"),
    cl::value_desc("type"), cl::cat(modelFlagsCategory()));
cl::opt<std::string>
    ampPolicy("amp-policy",
              cl::desc("A JSON file that moves ops between the mixed-precision "
                       "categories (low, f32, follow) and names layers to keep "
                       "in f32 (keep_f32)"),
              cl::value_desc("file"), cl::cat(modelFlagsCategory()));
cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("Bound the planned peak of a training step: bytes, or a size "
             "such as 512MiB or 2GB (default: the train section's "
             "memory_budget); activations are recomputed to meet it"),
    cl::value_desc("size"), cl::cat(modelFlagsCategory()));
cl::opt<std::string> budgetDevice(
    "device",
    cl::desc("The device whose memory --memory-budget, --fit-batch and the "
             "report's peak count: cpu (default) or cuda (the plan with the "
             "CUDA workspace and the GPU executor's buffers, its one "
             "cudaMalloc); the trainer runs on either"),
    cl::value_desc("cpu|cuda"), cl::init("cpu"), cl::cat(modelFlagsCategory()));
cl::opt<std::string>
    rematStrategy("remat",
                  cl::desc("What to recompute under a memory budget: none, "
                           "all, sqrt, auto or optimal (default auto)"),
                  cl::value_desc("strategy"), cl::init("auto"),
                  cl::cat(modelFlagsCategory()));
cl::opt<double> rematTimeLimit(
    "remat-time-limit",
    cl::desc("Seconds --remat=optimal's MILP solver may search in all, "
             "re-solves included (default 60)"),
    cl::value_desc("seconds"), cl::init(60), cl::cat(modelFlagsCategory()));
cl::opt<bool> fuseAttention(
    "fuse-attention",
    cl::desc("Rewrite written-out softmax(q @ k^T) @ v to fused attention "
             "(default true; =false keeps it as written, for comparisons)"),
    cl::init(true), cl::cat(modelFlagsCategory()));
cl::opt<bool> fuseLinearCrossEntropy(
    "fuse-linear-cross-entropy",
    cl::desc("Fuse cross_entropy of a classifier's product, the logits a "
             "chunk of rows at a time (default true; =false keeps them "
             "whole)"),
    cl::init(true), cl::cat(modelFlagsCategory()));
cl::opt<bool> fuseClassifierGradient(
    "fuse-classifier-gradient",
    cl::desc("Compute the fused classifier loss's gradient in the forward's "
             "pass over each chunk of logits (default true; =false "
             "recomputes the logits in the backward)"),
    cl::init(true), cl::cat(modelFlagsCategory()));
cl::opt<bool> recomputeCheap(
    "recompute-cheap",
    cl::desc("Recompute in the backward what an elementwise or normalization "
             "op computes from values the backward keeps anyway, instead of "
             "keeping it (default true; --remat=none or =false keeps it)"),
    cl::init(true), cl::cat(modelFlagsCategory()));
cl::opt<bool> transientGradients(
    "transient-gradients",
    cl::desc(
        "Plan parameter gradients in the arena instead of a persistent region"),
    cl::cat(modelFlagsCategory()));
cl::opt<int64_t> worldSize(
    "world-size",
    cl::desc("Plan for a data-parallel run of N ranks (mpirun -np N): each "
             "reads its rows of a global batch N times the model's, and the "
             "gradients are summed over the ranks (docs/distributed.md); "
             "--world-size 1 runs that path on one rank"),
    cl::value_desc("N"), cl::init(0), cl::cat(modelFlagsCategory()));
cl::opt<std::string> gradientBucketBytes(
    "gradient-bucket",
    cl::desc("With --world-size: the gradient bytes each sum over the ranks "
             "collects before it starts (default 4MiB)"),
    cl::value_desc("size"), cl::init("4MiB"), cl::cat(modelFlagsCategory()));
cl::opt<bool> shardOptimizer(
    "shard-optimizer",
    cl::desc("With --world-size: ZeRO-1, each rank keeps the optimizer state "
             "of 1/N of the parameters and updates them; gradients are "
             "reduce-scattered and the parameters all-gathered"),
    cl::cat(modelFlagsCategory()));
} // namespace

std::vector<std::string> mnemo::modelSearchPaths() {
  std::vector<std::string> paths(importPaths.begin(), importPaths.end());
  if (auto env = llvm::sys::Process::GetEnv("MNEMO_PATH")) {
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(*env).split(parts, ':', -1, false);
    for (llvm::StringRef p : parts)
      paths.push_back(p.str());
  }
  paths.push_back(MNEMO_DEFAULT_STDLIB);
  return paths;
}

bool mnemo::readModelFlags(ElaborateOptions &options, Diagnostics &diags) {
  options.modelName = modelName;
  bool ok = true;
  for (const std::string &define : defines) {
    auto [name, value] = llvm::StringRef(define).split('=');
    if (name.trim().empty() || value.trim().empty() ||
        define.find('=') == std::string::npos) {
      diags.error("-D " + define + ": expected name=value, as in -D layers=12");
      ok = false;
      continue;
    }
    options.overrides.emplace_back(name.trim().str(), value.trim().str());
  }
  return ok;
}

std::optional<int64_t> mnemo::parseSize(llvm::StringRef text) {
  text = text.trim();
  size_t digits = 0;
  while (digits < text.size() &&
         (llvm::isDigit(text[digits]) || text[digits] == '.'))
    ++digits;
  double number;
  if (digits == 0 || text.take_front(digits).getAsDouble(number))
    return std::nullopt;
  llvm::StringRef unit = text.drop_front(digits).trim();
  static const std::pair<const char *, double> units[] = {
      {"", 1},     {"B", 1},        {"KB", 1e3},        {"MB", 1e6},
      {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  for (auto [name, scale] : units)
    if (unit == name)
      return int64_t(number * scale);
  return std::nullopt;
}

bool mnemo::rematTimeLimitGiven() {
  return rematTimeLimit.getNumOccurrences() > 0;
}

std::string mnemo::memoryBudgetFlag() { return memoryBudget; }

void mnemo::reportFlagDiagnostics(mlir::MLIRContext &context,
                                  llvm::StringRef tool) {
  context.getDiagEngine().registerHandler(
      [tool = tool.str()](mlir::Diagnostic &diag) {
        auto name = llvm::dyn_cast<mlir::NameLoc>(diag.getLocation());
        if (!name || !name.getName().getValue().starts_with("--"))
          return mlir::failure();
        llvm::StringRef flag = name.getName().getValue();
        std::string given = flag.str();
        if (flag == "--memory-budget")
          given += "=" + memoryBudgetFlag();
        std::string message = diag.str();
        // "--precision must be ..." names its flag already.
        if (!llvm::StringRef(message).starts_with(flag))
          message = given + ": " + message;
        llvm::errs() << tool << ": error: " << message << "\n";
        return mlir::success();
      });
}

std::optional<PipelineOptions> mnemo::readPipelineFlags(llvm::StringRef tool) {
  PipelineOptions options;
  options.transientGradients = transientGradients;
  options.fuseAttention = fuseAttention;
  options.fuseLinearCrossEntropy = fuseLinearCrossEntropy;
  options.fuseClassifierGradient = fuseClassifierGradient;
  options.recomputeCheap = recomputeCheap;
  options.precision = precision;
  options.ampPolicy = ampPolicy;
  options.remat = rematStrategy;
  if (budgetDevice != "cpu" && budgetDevice != "cuda") {
    llvm::errs() << tool << ": error: --device is cpu or cuda, not '"
                 << budgetDevice << "'\n";
    return std::nullopt;
  }
  options.budgetDevice = budgetDevice;
  if (!(rematTimeLimit > 0 && rematTimeLimit <= 86400)) {
    llvm::errs() << tool
                 << ": error: --remat-time-limit must be a positive "
                    "number of seconds, at most 86400 (a day)\n";
    return std::nullopt;
  }
  options.rematTimeLimit = rematTimeLimit;
  if (worldSize.getNumOccurrences() && (worldSize < 1 || worldSize > 65536)) {
    llvm::errs() << tool << ": error: --world-size is a number of ranks "
                 << "from 1 to 65536, not " << worldSize << "\n";
    return std::nullopt;
  }
  if (worldSize >= 1 && transientGradients) {
    llvm::errs() << tool
                 << ": error: --world-size sums the gradients in their own "
                    "region: it cannot be combined with "
                    "--transient-gradients\n";
    return std::nullopt;
  }
  options.worldSize = worldSize;
  // --world-size 1 --shard-optimizer: one part, the whole state; the
  // sharded step on one rank (how one GPU checks it).
  if (shardOptimizer && worldSize < 1) {
    llvm::errs() << tool
                 << ": error: --shard-optimizer shards the optimizer state "
                    "over the ranks of a data-parallel plan: give "
                    "--world-size N\n";
    return std::nullopt;
  }
  options.shardOptimizer = shardOptimizer;
  std::optional<int64_t> bucket = parseSize(gradientBucketBytes);
  if (!bucket || *bucket < 4) {
    llvm::errs() << tool
                 << ": error: --gradient-bucket must be a size such as "
                    "4MiB or 65536, not '"
                 << gradientBucketBytes << "'\n";
    return std::nullopt;
  }
  options.gradientBucketBytes = *bucket;
  if (!memoryBudget.empty()) {
    std::optional<int64_t> bytes = parseSize(memoryBudget);
    if (!bytes || *bytes <= 0) {
      llvm::errs() << tool
                   << ": error: --memory-budget must be a positive "
                      "size such as 512MiB, 2GB or 1000000, not '"
                   << memoryBudget << "'\n";
      return std::nullopt;
    }
    options.memoryBudget = *bytes;
  }
  return options;
}

LoweredModel mnemo::lowerModel(mlir::MLIRContext &context, const Graph &graph,
                               const PipelineOptions &options,
                               const PipelineHooks &hooks) {
  LoweredModel lowered;
  lowered.module = mlirGen(context, graph);
  if (!lowered.module)
    return lowered;
  lowered.status = LoweredModel::Status::PipelineFailed;
  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
  if (hooks.build) {
    if (failed(hooks.build(pm)))
      return lowered;
  } else {
    buildDefaultPipeline(pm, options);
  }
  if (hooks.configure && failed(hooks.configure(pm)))
    return lowered;
  if (succeeded(pm.run(*lowered.module)))
    lowered.status = LoweredModel::Status::Planned;
  return lowered;
}
