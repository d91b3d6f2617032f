//===- mnemo-interp.cpp - Train a model with the reference interpreter ----===//
//
// Compiles a model file, initializes its parameters, and runs @train_step
// (and @eval_step) in the reference interpreter: on Fashion-MNIST (--data)
// or on random batches. It is the oracle's front door: the PyTorch
// comparison (test/reference/) and the differential tests of passes use it.
//
//   mnemo-interp examples/mlp.mn --data /usr/share/datasets/fashion-mnist \
//       --limit 2000 --epochs 3 --eval
//   mnemo-interp examples/gpt.mn --steps 5 --dump out/
//
// --dump writes what PyTorch needs to replay the run: init.safetensors,
// batches.safetensors, final.safetensors (parameters after the last step),
// losses.safetensors, and config.json (the model's settings).
//
//===----------------------------------------------------------------------===//

#include "frontend/Diagnostics.h"
#include "frontend/MLIRGen.h"
#include "frontend/Program.h"
#include "frontend/Sema.h"
#include "lang/MnemoOps.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"
#include "lang/interpreter/Interpreter.h"
#include "passes/Pipeline.h"
#include "passes/PlanExport.h"
#include "runtime/Failure.h"
#include "runtime/Idx.h"
#include "runtime/Init.h"
#include "runtime/OutputFiles.h"
#include "runtime/Safetensors.h"
#include "tools/driver/ModelDriver.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <numeric>
#include <optional>

using namespace mlir;
using namespace mnemo;
namespace cl = llvm::cl;

namespace {
cl::OptionCategory category("mnemo-interp options");
cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mn>"),
                               cl::Required, cl::cat(category));
cl::opt<int64_t> steps("steps", cl::desc("Training steps to run (default 5)"),
                       cl::init(5), cl::cat(category));
cl::opt<int64_t>
    epochs("epochs",
           cl::desc("With --data: passes over the data (overrides --steps)"),
           cl::init(0), cl::cat(category));
cl::opt<uint64_t>
    seed("seed", cl::desc("Seed for initialization, batches and shuffling"),
         cl::init(0), cl::cat(category));
cl::opt<std::string>
    dataDir("data",
            cl::desc("Train on Fashion-MNIST IDX files from this folder"),
            cl::value_desc("dir"), cl::cat(category));
cl::opt<int64_t>
    limit("limit",
          cl::desc("Use only the first N training (and test) examples"),
          cl::init(0), cl::cat(category));
cl::opt<bool> evaluate("eval",
                       cl::desc("Report test loss and accuracy after training"),
                       cl::cat(category));
cl::opt<std::string>
    dumpDir("dump",
            cl::desc("Write init/batches/final/losses safetensors here"),
            cl::value_desc("dir"), cl::cat(category));
cl::opt<bool> exact("exact",
                    cl::desc("Compute in double without rounding to f32"),
                    cl::cat(category));
cl::opt<double> ignoredTargets(
    "ignored-targets",
    cl::desc("In random batches, the fraction of a loss's class targets set "
             "to its ignore_index (default 0)"),
    cl::value_desc("fraction"), cl::init(0), cl::cat(category));
cl::opt<bool> arena("arena",
                    cl::desc("Run the planned steps inside one arena at the "
                             "planned offsets"),
                    cl::cat(category));
} // namespace

namespace {

/// How a train_step argument is fed.
struct StepArgument {
  ArgumentRole role = ArgumentRole::Input;
  std::string name;
  ElementType type;
  std::vector<int64_t> shape;
  DictionaryAttr init;
};

std::vector<StepArgument> describeArguments(func::FuncOp f) {
  std::vector<StepArgument> args;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto type = llvm::cast<RankedTensorType>(f.getArgumentTypes()[i]);
    StepArgument a;
    a.role = model::argumentRole(f, i).value_or(ArgumentRole::Input);
    a.name = model::argumentName(f, i).str();
    a.type = elementTypeOf(type);
    a.shape.assign(type.getShape().begin(), type.getShape().end());
    a.init = model::argumentInit(f, i);
    args.push_back(a);
  }
  return args;
}

runtime::InitSpec initSpecOf(DictionaryAttr init) {
  runtime::InitSpec spec;
  for (NamedAttribute entry : init) {
    if (auto s = llvm::dyn_cast<StringAttr>(entry.getValue())) {
      if (entry.getName() == "kind")
        spec.kind = s.getValue().str();
      else
        spec.symbols[entry.getName().str()] = s.getValue().str();
    } else if (auto f = llvm::dyn_cast<FloatAttr>(entry.getValue())) {
      spec.numbers[entry.getName().str()] = f.getValueAsDouble();
    } else if (auto i = llvm::dyn_cast<IntegerAttr>(entry.getValue())) {
      spec.numbers[entry.getName().str()] = double(i.getInt());
    }
  }
  return spec;
}

Tensor fromFloats(const StepArgument &a, const std::vector<float> &values) {
  Tensor t(a.type, a.shape);
  for (size_t i = 0; i < values.size(); ++i)
    t.data[i] = values[i];
  return t;
}

/// A tensor for a safetensors file: f32 (or f64 for the results of an
/// --exact run, which computes in double).
runtime::StoredTensor store(const std::string &name, const Tensor &t,
                            bool wide = false) {
  if (isFloat(t.type) && wide)
    return runtime::StoredTensor::f64(name, t.shape, t.data);
  if (isFloat(t.type)) {
    std::vector<float> values(t.data.begin(), t.data.end());
    return runtime::StoredTensor::f32(name, t.shape, values);
  }
  std::vector<int32_t> values(t.data.begin(), t.data.end());
  return runtime::StoredTensor::i32(name, t.shape, values);
}

/// The values an integer input may take: [0, range), the rows of the
/// table it indexes or the classes of the loss it is the target of, and
/// that loss's ignore_index.
struct IntegerRange {
  int64_t range = 2;
  std::optional<int64_t> ignoreIndex;
};
IntegerRange integerRange(func::FuncOp forward, const std::string &name) {
  mlir::Block &body = forward.getBody().front();
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    if (model::argumentName(forward, i) != name)
      continue;
    for (Operation *user : body.getArgument(i).getUsers()) {
      if (auto e = llvm::dyn_cast<EmbeddingOp>(user))
        return {e.getTable().getType().getDimSize(0), std::nullopt};
      if (auto ce = llvm::dyn_cast<CrossEntropyOp>(user))
        return {ce.getLogits().getType().getShape().back(),
                int64_t(ce.getIgnoreIndex())};
      if (auto ce = llvm::dyn_cast<LinearCrossEntropyOp>(user))
        return {ce.getWeight().getType().getDimSize(
                    ce.getTransposeWeight() ? 0 : 1),
                int64_t(ce.getIgnoreIndex())};
    }
  }
  return {};
}

/// Fashion-MNIST as batches for the model's one image input and one label.
struct Dataset {
  runtime::IdxArray images, labels;
  int64_t count() const { return labels.shape.empty() ? 0 : labels.shape[0]; }
};

bool loadSplit(const std::string &prefix, Dataset &d, std::string &error) {
  auto find = [&](const std::string &stem) {
    for (const char *suffix : {".gz", ""}) {
      std::string path = dataDir + "/" + prefix + "-" + stem + suffix;
      if (llvm::sys::fs::exists(path))
        return path;
    }
    return dataDir + "/" + prefix + "-" + stem + ".gz";
  };
  if (!runtime::readIdx(find("images-idx3-ubyte"), d.images, error, limit, 3) ||
      !runtime::readIdx(find("labels-idx1-ubyte"), d.labels, error, limit, 1))
    return false;
  if (d.images.shape.size() != 3 || d.images.shape[0] != d.labels.shape[0])
    return failWith(error, "the images and labels in '" + dataDir +
                               "' do not match (" +
                               std::to_string(d.images.shape[0]) + " images, " +
                               std::to_string(d.labels.shape[0]) + " labels)");
  return true;
}

/// Reports an error of the run as mnemo-interp's; false, for returning.
bool reportError(const llvm::Twine &message) {
  llvm::errs() << "mnemo-interp: error: " << message << "\n";
  return false;
}

/// One run of @train_step (and @eval_step) in the interpreter: the steps'
/// argument values, the batches, and what --dump records. Each phase
/// returns false after reporting what went wrong.
class InterpretedRun {
public:
  InterpretedRun(ModuleOp module, std::string modelName)
      : module(module), modelName(std::move(modelName)),
        forward(module.lookupSymbol<func::FuncOp>("forward")),
        trainStep(module.lookupSymbol<func::FuncOp>("train_step")),
        evalStep(module.lookupSymbol<func::FuncOp>("eval_step")) {
    interpreter.options.exact = exact;
    interpreter.options.arena = arena;
  }

  bool run() {
    if (!trainStep)
      return reportError("'" + inputFile +
                         "' has no train section, so there is nothing to "
                         "train");
    args = describeArguments(trainStep);
    if (evalStep)
      evalArgs = describeArguments(evalStep);
    return initializeState() && prepareBatches() && trainSteps() &&
           evaluateTestSet() && writeDump();
  }

private:
  bool initializeState();
  bool prepareBatches();
  bool trainSteps();
  bool runStep(int64_t step);
  void nextBatch(int64_t step, std::vector<Tensor> &batch);
  void fillBatch(const Dataset &d, const std::vector<int64_t> &indices,
                 int64_t first, std::vector<Tensor> &out) const;
  void randomBatch(int64_t step, std::vector<Tensor> &out) const;
  FailureOr<std::vector<Tensor>> evaluateOn(const std::vector<Tensor> &batch);
  bool evaluateTestSet();
  bool writeDump();
  llvm::json::Object dumpConfig() const;
  int64_t stepsPerEpoch() const { return train.count() / batchSize; }

  ModuleOp module;
  std::string modelName;
  func::FuncOp forward, trainStep, evalStep;
  Interpreter interpreter;
  // The train step's arguments, and their values: parameters and state as
  // the steps leave them, the last step's batch.
  std::vector<StepArgument> args, evalArgs;
  std::vector<Tensor> values;
  // The arguments a batch fills (inputs and targets), in order.
  std::vector<size_t> batchArgs;
  int64_t batchSize = 0, totalSteps = 0;
  Dataset train, test;
  // The data order of the current epoch, shuffled by `shuffler`.
  std::vector<int64_t> order;
  runtime::Rng shuffler{seed ^ 0x5eed};
  std::vector<double> losses;
  double epochLoss = 0;
  int64_t epochSteps = 0;
  // f16 steps whose scaled gradients overflowed (their update skipped).
  int64_t skippedSteps = 0;
  runtime::SafetensorsFile initFile, batchesFile;
};

/// Parameters and optimizer state, initialized by name.
bool InterpretedRun::initializeState() {
  values.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const StepArgument &a = args[i];
    if (!isPersistentRole(a.role))
      continue;
    std::vector<float> data;
    std::string error;
    runtime::Rng rng = runtime::rngFor(seed, a.name);
    if (!runtime::initialize(initSpecOf(a.init), a.shape, rng, data, error))
      return reportError(a.name + ": " + error);
    values[i] = fromFloats(a, data);
    if (a.role == ArgumentRole::Param || a.role == ArgumentRole::Buffer)
      initFile.tensors.push_back(store(a.name, values[i]));
  }
  return true;
}

/// Batches: Fashion-MNIST, or random data of the right shapes and ranges.
bool InterpretedRun::prepareBatches() {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].role == ArgumentRole::Input ||
        args[i].role == ArgumentRole::Target)
      batchArgs.push_back(i);
  if (batchArgs.empty() || args[batchArgs.front()].shape.empty())
    return reportError("the model needs a batched input to train on");
  batchSize = args[batchArgs.front()].shape[0];
  totalSteps = steps;
  if (dataDir.empty())
    return true;
  std::string error;
  if (!loadSplit("train", train, error) ||
      (evaluate && !loadSplit("t10k", test, error)))
    return reportError(error);
  const StepArgument &image = args[batchArgs[0]];
  const StepArgument &label =
      args[batchArgs.size() > 1 ? batchArgs[1] : batchArgs[0]];
  int64_t pixels = train.images.shape[1] * train.images.shape[2];
  int64_t imageValues = 1;
  for (int64_t d : image.shape)
    imageValues *= d;
  if (batchArgs.size() != 2 || image.role != ArgumentRole::Input ||
      label.role != ArgumentRole::Target || !isFloat(image.type) ||
      isFloat(label.type) || label.shape != std::vector<int64_t>{batchSize} ||
      imageValues != batchSize * pixels)
    return reportError("--data needs a model with one float input of " +
                       llvm::Twine(pixels) +
                       " values per example (such as f32[batch, 28, 28]) "
                       "and one integer target of shape [batch]");
  if (stepsPerEpoch() == 0)
    return reportError(llvm::Twine(train.count()) +
                       " examples do not fill one batch of " +
                       llvm::Twine(batchSize));
  if (epochs > INT64_MAX / stepsPerEpoch())
    return reportError(llvm::Twine(epochs) + " epochs of " +
                       llvm::Twine(stepsPerEpoch()) +
                       " steps do not fit the step counter");
  if (epochs > 0)
    totalSteps = stepsPerEpoch() * epochs;
  return true;
}

void InterpretedRun::fillBatch(const Dataset &d,
                               const std::vector<int64_t> &indices,
                               int64_t first, std::vector<Tensor> &out) const {
  Tensor image(args[batchArgs[0]].type, args[batchArgs[0]].shape);
  Tensor label(args[batchArgs[1]].type, args[batchArgs[1]].shape);
  int64_t pixels = d.images.shape[1] * d.images.shape[2];
  for (int64_t b = 0; b < batchSize; ++b) {
    int64_t n = indices[first + b];
    for (int64_t p = 0; p < pixels; ++p)
      image.data[b * pixels + p] = d.images.data[n * pixels + p] / 255.0;
    label.data[b] = d.labels.data[n];
  }
  out = {image, label};
}

void InterpretedRun::randomBatch(int64_t step, std::vector<Tensor> &out) const {
  out.clear();
  for (size_t i : batchArgs) {
    const StepArgument &a = args[i];
    runtime::Rng rng = runtime::rngFor(seed + uint64_t(step) * 7919, a.name);
    Tensor t(a.type, a.shape);
    IntegerRange range =
        isFloat(a.type) ? IntegerRange{} : integerRange(forward, a.name);
    bool ignoring = range.ignoreIndex && ignoredTargets > 0;
    for (double &x : t.data) {
      if (isFloat(a.type)) {
        x = roundTo(a.type, rng.normal());
        continue;
      }
      // The draw for ignoring comes first only when asked for, so the
      // batches of other runs stay as they were.
      if (ignoring && rng.uniform() < ignoredTargets)
        x = double(*range.ignoreIndex);
      else
        x = double(int64_t(rng.uniform() * double(range.range)));
    }
    out.push_back(t);
  }
}

/// Step `step`'s batch: the next of the shuffled data, or random.
void InterpretedRun::nextBatch(int64_t step, std::vector<Tensor> &batch) {
  if (dataDir.empty()) {
    randomBatch(step, batch);
    return;
  }
  int64_t within = (step - 1) % stepsPerEpoch();
  if (within == 0) {
    order.resize(train.count());
    std::iota(order.begin(), order.end(), 0);
    for (int64_t i = int64_t(order.size()) - 1; i > 0; --i)
      std::swap(order[i], order[int64_t(shuffler.uniform() * double(i + 1))]);
  }
  fillBatch(train, order, within * batchSize, batch);
}

bool InterpretedRun::trainSteps() {
  for (int64_t step = 1; step <= totalSteps; ++step)
    if (!runStep(step))
      return false;
  if (skippedSteps)
    llvm::outs() << "f16 loss scaling skipped " << skippedSteps
                 << " step(s) whose gradients overflowed\n";
  return true;
}

bool InterpretedRun::runStep(int64_t step) {
  std::vector<Tensor> batch;
  nextBatch(step, batch);
  for (size_t k = 0; k < batchArgs.size(); ++k) {
    values[batchArgs[k]] = batch[k];
    if (!dumpDir.empty())
      batchesFile.tensors.push_back(store(
          args[batchArgs[k]].name + "." + std::to_string(step), batch[k]));
  }
  values[args.size() - 2] = Tensor(ElementType::I64, {}, double(step));
  values[args.size() - 1] = Tensor(ElementType::I64, {}, double(totalSteps));

  interpreter.options.dropoutStep = step;
  std::string error;
  FailureOr<std::vector<Tensor>> results =
      interpreter.run(trainStep, values, error);
  if (failed(results))
    return reportError("step " + llvm::Twine(step) + ": " + error);
  // Results: the updated params and state (each names the argument it
  // replaces), and scalars by name: loss, lr, grad_norm (and skipped, with
  // f16 loss scaling).
  double loss = 0, lr = 0, gradNorm = 0;
  for (unsigned r = 0; r < results->size(); ++r) {
    if (std::optional<unsigned> reuses = plan::reusedArgument(trainStep, r)) {
      values[*reuses] = std::move((*results)[r]);
      continue;
    }
    StringRef n = model::resultName(trainStep, r);
    double v = (*results)[r].data.empty() ? 0 : (*results)[r].data[0];
    if (n == "loss")
      loss = v;
    else if (n == "lr")
      lr = v;
    else if (n == "grad_norm")
      gradNorm = v;
    else if (n == "skipped" && v != 0)
      ++skippedSteps;
  }
  losses.push_back(loss);
  epochLoss += loss;
  ++epochSteps;
  if (dataDir.empty() || epochs == 0) {
    llvm::outs() << llvm::format(
        "step %lld  loss %.6f  lr %.3g  grad_norm %.4f\n", (long long)step,
        loss, lr, gradNorm);
  } else if (step % stepsPerEpoch() == 0) {
    llvm::outs() << llvm::format("epoch %lld  mean loss %.6f  (%lld steps)\n",
                                 (long long)(step / stepsPerEpoch()),
                                 epochLoss / double(epochSteps),
                                 (long long)epochSteps);
    epochLoss = 0;
    epochSteps = 0;
  }
  llvm::outs().flush();
  return true;
}

/// The eval step on `batch` (its inputs and targets, in the train step's
/// order), with the trained parameters and buffers.
FailureOr<std::vector<Tensor>>
InterpretedRun::evaluateOn(const std::vector<Tensor> &batch) {
  std::vector<Tensor> evalValues(evalArgs.size());
  size_t next = 0;
  for (size_t i = 0; i < evalArgs.size(); ++i) {
    if (evalArgs[i].role == ArgumentRole::Input ||
        evalArgs[i].role == ArgumentRole::Target) {
      evalValues[i] = batch[next++];
      continue;
    }
    for (size_t j = 0; j < args.size(); ++j)
      if (args[j].role == evalArgs[i].role && args[j].name == evalArgs[i].name)
        evalValues[i] = values[j];
  }
  std::string error;
  FailureOr<std::vector<Tensor>> results =
      interpreter.run(evalStep, evalValues, error);
  if (failed(results))
    reportError("evaluation: " + error);
  return results;
}

/// --eval: the test split's loss and accuracy.
bool InterpretedRun::evaluateTestSet() {
  if (!evaluate || !evalStep || test.count() < batchSize)
    return true;
  std::vector<int64_t> sequential(test.count());
  std::iota(sequential.begin(), sequential.end(), 0);
  double lossSum = 0, accuracySum = 0;
  int64_t batches = test.count() / batchSize;
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<Tensor> batch;
    fillBatch(test, sequential, b * batchSize, batch);
    FailureOr<std::vector<Tensor>> results = evaluateOn(batch);
    if (failed(results))
      return false;
    lossSum += (*results)[0].data[0];
    accuracySum += results->size() > 1 ? (*results)[1].data[0] : 0;
  }
  llvm::outs() << llvm::format(
      "test  loss %.6f  accuracy %.4f  (%lld examples)\n",
      lossSum / double(batches), accuracySum / double(batches),
      (long long)(batches * batchSize));
  return true;
}

/// --dump: what PyTorch needs to replay the run (the format of the
/// trainer's --dump, runtime/RunDump.h), and the trained model's eval loss
/// on the last batch.
bool InterpretedRun::writeDump() {
  if (dumpDir.empty())
    return true; // checkOptions created the directory
  runtime::SafetensorsFile finalFile, lossesFile;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].role == ArgumentRole::Param ||
        args[i].role == ArgumentRole::Buffer)
      finalFile.tensors.push_back(store(args[i].name, values[i], exact));
  // The trained model evaluated on the last batch (as torch's model.eval():
  // running statistics, no dropout).
  std::vector<Tensor> lastBatch; // what the last step's arguments hold
  for (size_t k : batchArgs)
    lastBatch.push_back(values[k]);
  if (evalStep && totalSteps > 0) {
    FailureOr<std::vector<Tensor>> results = evaluateOn(lastBatch);
    if (failed(results))
      return false;
    double evalLoss = (*results)[0].data[0];
    lossesFile.tensors.push_back(
        exact
            ? runtime::StoredTensor::f64("eval_loss", {1}, {evalLoss})
            : runtime::StoredTensor::f32("eval_loss", {1}, {float(evalLoss)}));
  }
  lossesFile.tensors.push_back(
      exact
          ? runtime::StoredTensor::f64("loss", {int64_t(losses.size())}, losses)
          : runtime::StoredTensor::f32(
                "loss", {int64_t(losses.size())},
                std::vector<float>(losses.begin(), losses.end())));
  std::string error;
  for (auto &[name, file] :
       {std::pair<const char *, runtime::SafetensorsFile *>{"init", &initFile},
        {"batches", &batchesFile},
        {"final", &finalFile},
        {"losses", &lossesFile}})
    if (!runtime::writeSafetensors(dumpDir + "/" + name + ".safetensors", *file,
                                   error))
      return reportError(error);
  std::error_code ec;
  llvm::raw_fd_ostream os(dumpDir + "/config.json", ec);
  if (ec)
    return reportError("cannot write config.json: " + ec.message());
  os << llvm::formatv("{0:2}", llvm::json::Value(dumpConfig())) << "\n";
  return true;
}

/// config.json: the model, its settings, and which tensors are parameters
/// and which the batch.
llvm::json::Object InterpretedRun::dumpConfig() const {
  llvm::json::Object config;
  config["model"] = modelName;
  config["steps"] = totalSteps;
  config["precision"] = exact ? "f64" : model::precision(module).str();
  config["hyperparams"] = attributeToJson(model::hyperparams(module));
  config["train"] = attributeToJson(model::trainSettings(module));
  llvm::json::Array params, batchNames;
  for (const StepArgument &a : args) {
    if (a.role == ArgumentRole::Param)
      params.push_back(a.name);
    if (a.role == ArgumentRole::Input || a.role == ArgumentRole::Target)
      batchNames.push_back(a.name);
  }
  config["params"] = std::move(params);
  config["batch"] = std::move(batchNames);
  return config;
}

} // namespace

/// The options' values, checked before any work, as the trainer checks
/// its own: a run of 0 steps, or a --dump that cannot be written (the
/// files of writeDump), is an error now, not after the steps.
static bool checkOptions() {
  auto fail = [](const std::string &message) {
    llvm::errs() << "mnemo-interp: error: " << message << "\n";
    return false;
  };
  for (auto [option, value, least] :
       {std::tuple<const char *, int64_t, int64_t>{"--steps", steps, 1},
        {"--epochs", epochs, 0},
        {"--limit", limit, 0}})
    if (value < least)
      return fail(std::string(option) + " needs a whole number of at least " +
                  std::to_string(least) + ", not " + std::to_string(value));
  if (!(ignoredTargets >= 0 && ignoredTargets <= 1))
    return fail("--ignored-targets is a fraction from 0 to 1");
  if (dumpDir.empty())
    return true;
  // --dump creates its directory, parents included.
  if (!llvm::sys::fs::exists(dumpDir))
    if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir))
      return fail("cannot create '" + dumpDir + "': " + ec.message());
  std::string error;
  if (!runtime::checkOutputs(
          {},
          {{{"--dump", dumpDir},
            {"init.safetensors", "batches.safetensors", "final.safetensors",
             "losses.safetensors", "config.json"}}},
          {{"--data", dataDir}}, error))
    return fail(error);
  return true;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&category, &modelFlagsCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "mnemo-interp: train a model with the reference interpreter\n");

  if (!checkOptions())
    return 1;
  llvm::SourceMgr sourceMgr;
  Diagnostics diags(sourceMgr, llvm::errs());
  ElaborateOptions options;
  if (!readModelFlags(options, diags))
    return 1;
  std::optional<PipelineOptions> pipelineOptions =
      readPipelineFlags("mnemo-interp");
  if (!pipelineOptions)
    return 1;
  std::unique_ptr<Program> program =
      loadProgramFile(inputFile, modelSearchPaths(), diags);
  if (!program || diags.hadError())
    return 1;
  std::optional<Graph> graph = elaborate(*program, options, diags);
  if (!graph || diags.hadError())
    return 1;

  MLIRContext context;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  reportFlagDiagnostics(context, "mnemo-interp");
  LoweredModel lowered = lowerModel(context, *graph, *pipelineOptions);
  if (lowered.status == LoweredModel::Status::GenerationFailed)
    return 2;
  if (!lowered.planned())
    return 1;
  OwningOpRef<ModuleOp> module = std::move(lowered.module);
  InterpretedRun run(*module, graph->modelName);
  return run.run() ? 0 : 1;
}
