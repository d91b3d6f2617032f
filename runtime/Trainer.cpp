//===- Trainer.cpp - The generated trainer's main -------------------------===//
//
// Links with the code mnemoc generates for one model (which defines
// mnemoModel()) and trains it:
//
//   train --data PATH [--epochs N | --steps N] [--eval] [--save FILE]
//         [--resume FILE] [--init FILE] [--seed S] [--threads T]
//         [--summary-json FILE] [--export FILE] [--dump DIR] [--quiet]
//
// Memory: every region of the plan (arena, parameters, gradients, optimizer
// state, batch, workspace) is carved out of one allocation made before the
// first step; the step loop allocates nothing. Batches are prepared by a
// loader thread one step ahead, in two staging buffers of one batch each:
// that, the threads' stacks and OpenBLAS's buffers are the runtime's
// overhead over the plan, which --summary-json reports next to the plan.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/convolution/ConvolutionKernels.h"
#include "lang/ops/matmul/MatmulKernels.h"
#include "runtime/Checkpoint.h"
#include "runtime/CommandLine.h"
#include "runtime/Data.h"
#include "runtime/Executor.h"
#include "runtime/Export.h"
#include "runtime/Failure.h"
#include "runtime/Init.h"
#include "runtime/Model.h"
#include "runtime/OutputFiles.h"
#include "runtime/Progress.h"
#include "runtime/Ranks.h"
#include "runtime/RunDump.h"
#include "runtime/StepProfile.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

using namespace mnemo;
using namespace mnemo::runtime;

namespace {

const char *const kUsage = R"(usage: train --data PATH [options]

Trains the model this program was compiled from (mnemoc MODEL.mn -o DIR).

  --data PATH          a directory of IDX files (Fashion-MNIST: train-*, t10k-*),
                       arrays named after the model's inputs and targets (a
                       .safetensors file, or a directory of train.safetensors
                       and test.safetensors, or of train/NAME.npy and
                       test/NAME.npy), a token file (uint16, .bin), or
                       recorded batches (.safetensors, from mnemo-interp
                       --dump)
  --epochs N           passes over the training data (default: the model's
                       train section, else 1)
  --steps N            train for N steps instead
  --eval               report test loss and accuracy after each epoch
  --save FILE          write a checkpoint at the end (and on Ctrl-C)
  --export FILE        write the trained weights for inference: int8/int4 with
                       scales (qat), 2:4-packed or CSR (pruned); see
                       docs/compression.md
  --resume FILE        continue a run from its checkpoint, bit-identically
  --init FILE          start from the parameters in FILE (safetensors)
  --seed S             seed for initialization, shuffling and dropout (default 0)
  --streams            token data as contiguous streams: row b of each batch
                       continues row b of the previous one (for a model that
                       carries its state across batches, truncated BPTT)
  --threads T          worker threads and OpenBLAS threads (default: all cores;
                       under mpirun, the cores over the ranks on the machine)
  --collective-timeout S
                       under mpirun: seconds a rank waits for the others in a
                       collective before the run stops, naming the ranks
                       that never arrived (default 300)
  --summary-json FILE  write the run's figures (losses, speed, memory) as JSON
  --dump DIR           write initial and final weights, batches and losses in
                       the format test/reference/compare.py reads
  --stop-after N       stop after N steps as if interrupted (tests resume)
  --profile            time every op of the step and print where the time goes
  --device cuda|cpu    where the steps run (default: the GPU when there is one)
  --matmul-precision high|highest
                       f32 GEMMs and convolutions on the GPU: high (default,
                       TF32 tensor cores, as PyTorch's "high") or highest
                       (full f32)
  --quiet              no progress display
)";

struct Options {
  DeviceOptions devices;
  std::string data, save, resume, init, summaryJson, dump, exportPath;
  int64_t epochs = 0, steps = 0, stopAfter = 0;
  uint64_t seed = 0;
  double collectiveTimeout = 300;
  bool eval = false, quiet = false, profile = false, seedGiven = false;
  bool streams = false;
};

[[noreturn]] void fail(const std::string &message) {
  exitWithError("train", message);
}

Options parseOptions(int argc, char **argv) {
  Options o;
  CommandLine args("train", kUsage, argc, argv);
  while (args.next()) {
    if (args.deviceOption(o.devices))
      continue;
    if (args.is("--data"))
      o.data = args.path();
    else if (args.is("--epochs"))
      o.epochs = args.number(1, INT64_MAX);
    else if (args.is("--steps"))
      o.steps = args.number(1, INT64_MAX);
    else if (args.is("--stop-after"))
      o.stopAfter = args.number(1, INT64_MAX);
    else if (args.is("--eval"))
      o.eval = true;
    else if (args.is("--save"))
      o.save = args.path();
    else if (args.is("--resume"))
      o.resume = args.path();
    else if (args.is("--init"))
      o.init = args.path();
    else if (args.is("--seed")) {
      o.seed = uint64_t(args.number(0, INT64_MAX));
      o.seedGiven = true;
    } else if (args.is("--collective-timeout"))
      o.collectiveTimeout = double(args.number(1, 24 * 3600));
    else if (args.is("--export"))
      o.exportPath = args.path();
    else if (args.is("--summary-json"))
      o.summaryJson = args.path();
    else if (args.is("--dump"))
      o.dump = args.path();
    else if (args.is("--quiet"))
      o.quiet = true;
    else if (args.is("--streams"))
      o.streams = true;
    else if (args.is("--profile"))
      o.profile = true;
    else
      args.unknown();
  }
  if (o.data.empty())
    fail("--data is required (see --help)");
  if (o.epochs && o.steps)
    fail("--epochs and --steps exclude each other");
  if (!o.resume.empty() && !o.init.empty())
    fail("--resume and --init exclude each other");
  return o;
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

int64_t statusKb(const char *key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  size_t n = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':')
      return std::atoll(line.c_str() + n + 1);
  return -1;
}

/// Resets the kernel's peak-RSS counter, so that the peak measured later
/// is the training's, not the data loading's.
void resetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
}

//===----------------------------------------------------------------------===//
// The loader thread
//===----------------------------------------------------------------------===//

/// Prepares the batch of step s + 1 while step s runs.
class Prefetcher {
public:
  Prefetcher(BatchSource &source, int64_t inputBytes, int64_t first,
             int64_t last)
      : source(source), next(first), last(last) {
    for (auto &slot : slots)
      slot.bytes.assign(inputBytes, 0);
    worker = std::thread([this] { run(); });
  }
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    worker.join();
  }

  /// Copies step `step`'s batch tensors into `inputs`.
  bool take(int64_t step, uint8_t *inputs, const BatchLayout &layout,
            std::string &error) {
    Slot &slot = slots[step % 2];
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return slot.step == step; });
    if (!slot.error.empty())
      return failWith(error, slot.error);
    for (const ArgumentInfo *a : layout.tensors)
      std::memcpy(inputs + a->offset, slot.bytes.data() + a->offset, a->bytes);
    slot.step = 0; // free for step + 2
    changed.notify_all();
    return true;
  }

private:
  struct Slot {
    std::vector<uint8_t> bytes;
    int64_t step = 0; // the step it holds; 0 when free
    std::string error;
  };

  void run() {
    for (int64_t step = next; step <= last; ++step) {
      Slot &slot = slots[step % 2];
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return stopping || slot.step == 0; });
        if (stopping)
          return;
      }
      std::string error;
      source.trainBatch(step, slot.bytes.data(), error);
      std::lock_guard<std::mutex> lock(mutex);
      slot.error = error;
      slot.step = step;
      changed.notify_all();
    }
  }

  BatchSource &source;
  int64_t next, last;
  Slot slots[2];
  std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;
  std::thread worker;
};

/// The signal that asked the run to stop (SIGINT, SIGTERM, SIGHUP), or 0.
std::atomic<int> interrupted{0};

/// Heap allocations made while a step runs (by the step's threads): the
/// plan promises there are none, and --summary-json reports the count.
std::atomic<int64_t> stepAllocations{0};
/// Those a library made inside its call (cpu::LibraryCallScope: oneDNN's
/// execute), transient and reported apart.
std::atomic<int64_t> libraryAllocations{0};

void *allocate(std::size_t bytes) {
  if (cpu::inStep())
    (cpu::inLibraryCall() ? libraryAllocations : stepAllocations)
        .fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(bytes ? bytes : 1))
    return p;
  throw std::bad_alloc();
}

/// Ctrl-C, and the SIGTERM (or SIGHUP) a scheduler sends before it kills:
/// the current step finishes and the run saves. A second one of the same
/// signal exits at once.
void onInterrupt(int signal) {
  interrupted = signal;
  std::signal(signal, SIG_DFL);
}

const ArgumentInfo *argumentWithRole(const StepInfo &step, ArgumentRole role) {
  for (int i = 0; i < step.numArguments; ++i)
    if (step.arguments[i].role == role)
      return &step.arguments[i];
  return nullptr;
}

bool fileExists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

} // namespace

// Every operator new of the program goes through the counter.
void *operator new(std::size_t bytes) { return allocate(bytes); }
void *operator new[](std::size_t bytes) { return allocate(bytes); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }

namespace {

/// A pruned weight's mask (lang/ops/pruning/PruningFormulas.h: 1 bit per
/// element, set when pruned): how many of its elements are pruned.
struct MaskSparsity {
  std::string weight;
  int64_t pruned = 0, elements = 0;
};

/// Every mask of the training step, counted in `memory` (or only listed,
/// when null).
std::vector<MaskSparsity> maskSparsity(const ModelInfo &model,
                                       const StepMemory *memory) {
  std::vector<MaskSparsity> result;
  const StepInfo &step = model.trainStep;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &mask = step.arguments[i];
    std::string name = mask.name;
    if (mask.role != ArgumentRole::OptState || name.size() < 5 ||
        name.compare(name.size() - 5, 5, ".mask") != 0)
      continue;
    MaskSparsity m;
    m.weight = name.substr(0, name.size() - 5);
    for (int j = 0; j < step.numArguments; ++j)
      if (m.weight == step.arguments[j].name) {
        m.elements = step.arguments[j].elements();
      }
    if (memory) {
      const uint8_t *words = memory->optimizerState + mask.offset;
      for (int64_t w = 0; w < (m.elements + 31) / 32; ++w) {
        uint32_t word;
        std::memcpy(&word, words + 4 * w, 4);
        m.pruned += __builtin_popcount(word);
      }
    }
    result.push_back(m);
  }
  return result;
}

/// A checkpoint of the run in a new file, for when its outputs could not be
/// written: in $TMPDIR (or /tmp), else the working directory. Returns its
/// path, or "" with `error` when no place took it.
std::string rescueCheckpoint(const ModelInfo &model, const StepMemory &memory,
                             const RunPosition &position, std::string &error) {
  const char *tmp = std::getenv("TMPDIR");
  for (std::string dir :
       {std::string(tmp && *tmp ? tmp : "/tmp"), std::string(".")}) {
    std::string stem = dir + "/" + model.name + "-step" +
                       std::to_string(position.step) + "-rescued";
    std::string path = stem + ".safetensors";
    for (int n = 1; fileExists(path); ++n)
      path = stem + "-" + std::to_string(n) + ".safetensors";
    if (saveCheckpoint(path, model, memory, position, error))
      return path;
  }
  return "";
}

/// ZeRO-1: the optimizer state in the full layout (stateTensors copies of
/// the padded gradient region) and a rank's parts of it.
int64_t fullStateBytes(const StepInfo &train) {
  int64_t end = 0;
  for (int i = 0; i < train.numArguments; ++i)
    if (train.arguments[i].role == ArgumentRole::OptState)
      end = std::max(end, train.arguments[i].offset + train.arguments[i].bytes);
  return end;
}

/// Rank `rank`'s parts of a full optimizer state: part `rank` of each
/// state's copy of the gradient region.
void takeStateParts(const StepInfo &train, const std::vector<uint8_t> &full,
                    int rank, int ranks, uint8_t *parts) {
  int64_t shard = train.shardBytes, region = shard * ranks;
  for (int t = 0; t < train.stateTensors; ++t) {
    int64_t from = t * region + rank * shard;
    int64_t bytes = std::clamp<int64_t>(int64_t(full.size()) - from, 0, shard);
    std::memcpy(parts + t * shard, full.data() + from, bytes);
  }
}

/// The inverse, from every rank's parts in rank order.
void joinStateParts(const StepInfo &train, const std::vector<uint8_t> &parts,
                    int ranks, uint8_t *full) {
  int64_t shard = train.shardBytes, region = shard * ranks;
  int64_t perRank = shard * train.stateTensors;
  int64_t fullBytes = fullStateBytes(train);
  for (int r = 0; r < ranks; ++r)
    for (int t = 0; t < train.stateTensors; ++t) {
      int64_t to = t * region + r * shard;
      int64_t bytes = std::clamp<int64_t>(fullBytes - to, 0, shard);
      std::memcpy(full + to, parts.data() + r * perRank + t * shard, bytes);
    }
}

/// Before step 1: every output can be written, none is another output or
/// an input (runtime/OutputFiles.h); what a killed save left is removed.
void checkOutputsOf(const Options &options, const BatchSource &source) {
  std::vector<NamedFile> outputs, inputs;
  for (auto [option, path] :
       {std::pair<const char *, const std::string *>{"--save", &options.save},
        {"--export", &options.exportPath},
        {"--summary-json", &options.summaryJson}})
    if (!path->empty())
      outputs.push_back({option, *path});
  std::vector<OutputDirectory> directories;
  if (!options.dump.empty())
    directories.push_back({{"--dump", options.dump}, RunDump::files()});
  inputs.push_back({"--data", options.data});
  for (const std::string &file : source.files())
    inputs.push_back({"--data", file});
  inputs.push_back({"--resume", options.resume});
  inputs.push_back({"--init", options.init});
  std::string error;
  if (!checkOutputs(outputs, directories, inputs, error))
    fail(error);
  for (const NamedFile &out : outputs)
    for (const std::string &stale : removeStaleTemporaries(out.path))
      std::printf("note: removed '%s', left by a write that was killed\n",
                  stale.c_str());
}

} // namespace

namespace {

/// One run of the trainer, from its options to its outputs. run() calls
/// the phases in order; each one reports what it cannot do and exits.
class TrainingRun {
public:
  explicit TrainingRun(Options options)
      : options(std::move(options)), model(*mnemoModel()),
        train(model.trainStep), eval(model.evalStep), plan(model) {}

  /// The program's exit status.
  int run();

private:
  void joinRanks();
  void readCheckpoints();
  void noteGlobalBatchChange() const;
  void openData();
  void allocatePlan();
  void initializeParameters();
  void decideLength();
  void startDevice();
  void printStart() const;
  void trainSteps();
  void runStep(int64_t s, const FetchBatch &fetch);
  void afterStep(int64_t s);
  std::string evaluate(int64_t afterStep);
  void gatherShardedState();
  int writeOutputs();
  void saveCheckpoint(std::vector<std::string> &writeErrors);
  void exportWeights(std::vector<std::string> &writeErrors);
  void writeSummary(const std::vector<MaskSparsity> &sparsity,
                    std::vector<std::string> &writeErrors);
  void rescueState() const;
  int exitStatus() const { return interrupted ? 128 + interrupted : 0; }

  Options options;
  const ModelInfo &model;
  const StepInfo &train, &eval;
  std::string error;

  std::unique_ptr<Ranks> ranks;
  Checkpoint resume, init;
  RunPosition position;
  BatchLayout trainBatch, evalBatch;
  std::unique_ptr<BatchSource> source;
  // The process's resident memory before the plan is allocated, and its
  // peak when the steps are done.
  int64_t rssBefore = 0, rssPeak = 0;
  HostPlanMemory plan;
  StepMemory memory;
  // Every op's time for --profile, large enough for the CPU step or the
  // device step, whichever runs.
  std::vector<double> opSeconds;
  std::unique_ptr<GradientExchange> exchange;
  Device device;

  // The run's length: steps first to last of total (an interrupted run's
  // total), perEpoch a pass over the data.
  int64_t perEpoch = 0, totalSteps = 0, firstStep = 0, lastStep = 0;
  // The last step done.
  int64_t step = 0;
  std::unique_ptr<Progress> progress;
  std::unique_ptr<RunDump> dump;
  std::vector<double> losses, stepMs;
  nlohmann::json evaluations = nlohmann::json::array();
  double epochLoss = 0;
  int64_t epochSteps = 0, skippedSteps = 0;
  bool lossScaling = false, nanReported = false;
  // ZeRO-1: the optimizer state whole on rank 0, for the checkpoint.
  std::vector<uint8_t> fullState;
  // Where a checkpoint goes: --save, or a new file when interrupted.
  std::string savePath;
  bool stateSaved = false;
};

int TrainingRun::run() {
  joinRanks();
  // The convolutions' and 16-bit products' primitives, for these threads,
  // before any step.
  cpu::prepareConvolutions(cpu::threads());
  cpu::prepareMatmuls(cpu::threads());
  // The checkpoint and the data first: a bad file is reported before
  // anything else happens.
  readCheckpoints();
  openData();
  allocatePlan();
  initializeParameters();
  decideLength();
  // From here on, Ctrl-C, SIGTERM and SIGHUP finish the current step and
  // save.
  for (int signal : {SIGINT, SIGTERM, SIGHUP})
    std::signal(signal, onInterrupt);
  std::printf("model %s (%s), %s\n", model.name, model.sourceFile,
              source->describe().c_str());
  startDevice();
  printStart();
  if (!options.dump.empty())
    dump = std::make_unique<RunDump>(model, memory);
  trainSteps();
  if (options.profile && step > firstStep)
    printStepProfile(
        opSeconds.data(),
        device.executor ? device.executor->trainOpNames() : train.opNames,
        device.executor ? device.executor->numTrainOps() : train.numOps,
        step - firstStep);
  gatherShardedState();
  // The other ranks hold the same parameters: rank 0 saves and reports.
  if (!ranks->leader())
    return exitStatus();
  return writeOutputs();
}

/// A data-parallel run: one rank of those the launcher started, running the
/// plan they all run. Alone, a run of one rank.
void TrainingRun::joinRanks() {
  ranks = Ranks::join(error);
  if (!ranks)
    fail(error);
  if (ranks->size() != model.worldSize)
    fail(model.worldSize == 1
             ? "launched as " + std::to_string(ranks->size()) +
                   " ranks, but this trainer was compiled for one process "
                   "(compile it with mnemoc --world-size " +
                   std::to_string(ranks->size()) + ")"
             : "this trainer was compiled for " +
                   std::to_string(model.worldSize) +
                   " ranks (mnemoc --world-size " +
                   std::to_string(model.worldSize) +
                   "); launch it with mpirun "
                   "-np " +
                   std::to_string(model.worldSize) + ", not as " +
                   std::to_string(ranks->size()));
  ranks->setTimeout(options.collectiveTimeout);
  if (!ranks->agreeOnPlan(model.planHash, error))
    fail(error);
  // Only rank 0 prints (the others' errors still reach stderr) and writes
  // files.
  if (!ranks->leader()) {
    options.quiet = true;
    if (!std::freopen("/dev/null", "w", stdout))
      fail("cannot silence rank " + std::to_string(ranks->rank()) +
           "'s output");
  }
  // Ranks on one machine share its cores.
  int threads = options.devices.threads;
  if (threads == 0 && ranks->localSize() > 1 && !std::getenv("OMP_NUM_THREADS"))
    threads = std::max(1, cpu::availableCores() / ranks->localSize());
  if (!cpu::setThreads(threads, error))
    fail(error);
}

/// --resume's and --init's checkpoints. A resumed run takes the
/// checkpoint's seed, which decides the data order.
void TrainingRun::readCheckpoints() {
  position.seed = options.seed;
  if (!options.resume.empty()) {
    if (!readCheckpoint(options.resume, model, true, resume, error))
      fail("cannot resume: " + error);
    if (position.seed != resume.position.seed && options.seedGiven)
      std::printf("note: resuming with the checkpoint's seed %llu, not %llu\n",
                  (unsigned long long)resume.position.seed,
                  (unsigned long long)options.seed);
    position = resume.position;
    if (position.threads != 0 && position.threads != cpu::threads())
      std::printf("note: the checkpoint was written with %d threads and this "
                  "run uses %d; sums may round differently than in an "
                  "uninterrupted run\n",
                  position.threads, cpu::threads());
  }
  if (!options.init.empty() &&
      !readCheckpoint(options.init, model, false, init, error))
    fail("--init: " + error);
}

/// The data order follows the global batch: another one reads other
/// batches from the checkpoint's step on; other ranks with the same global
/// batch read the same ones.
void TrainingRun::noteGlobalBatchChange() const {
  int64_t globalBatch = trainBatch.batchSize * ranks->size();
  if (position.globalBatch != 0 && position.globalBatch != globalBatch)
    std::printf("note: the checkpoint was written by a run with global "
                "batch %lld (%d rank%s) and this run's is %lld (%d "
                "rank%s): from step %lld on it reads other batches than "
                "the run that wrote it would have\n",
                (long long)position.globalBatch, position.ranks,
                position.ranks == 1 ? "" : "s", (long long)globalBatch,
                ranks->size(), ranks->size() == 1 ? "" : "s",
                (long long)position.step + 1);
  else if (position.ranks != 0 && position.ranks != ranks->size())
    std::printf("note: the checkpoint was written by %d rank%s and this "
                "run has %d, with the same global batch %lld: the same "
                "batches, their gradients summed in another order\n",
                position.ranks, position.ranks == 1 ? "" : "s", ranks->size(),
                (long long)globalBatch);
}

void TrainingRun::openData() {
  trainBatch = batchLayoutOf(train);
  if (!options.resume.empty())
    noteGlobalBatchChange();
  evalBatch = eval.run ? batchLayoutOf(eval) : BatchLayout{};
  source =
      openBatchSource(options.data, trainBatch, evalBatch, position.seed, error,
                      options.streams, {ranks->rank(), ranks->size()});
  if (!source)
    fail(error);
  if (ranks->leader())
    checkOutputsOf(options, *source);
}

/// One allocation for the whole plan (the step loop then allocates
/// nothing), and the gradient exchange with the other ranks that reads it.
void TrainingRun::allocatePlan() {
  resetPeakRss();
  rssBefore = statusKb("VmRSS") * 1024;
  if (!plan.allocate(memory, error))
    fail(error);
  memory.opSeconds = nullptr;
  opSeconds.assign(std::max(1, 4 * train.numOps + 64), 0.0);
  // The step sums its gradients with the other ranks' (null alone).
  memory.shardRank = ranks->rank();
  memory.shardBytes = train.shardBytes;
  exchange = ranks->gradientExchange(train, memory);
  memory.exchange = exchange.get();
}

/// Parameters and buffers: from the seed, or loaded.
void TrainingRun::initializeParameters() {
  if (!options.resume.empty()) {
    if (!train.shardBytes) {
      applyCheckpoint(resume, model, memory);
      return;
    }
    // ZeRO-1: the checkpoint holds every state whole; this rank keeps its
    // parts (whatever world size wrote it).
    std::vector<uint8_t> full(fullStateBytes(train));
    StepMemory whole = memory;
    whole.optimizerState = full.data();
    applyCheckpoint(resume, model, whole);
    takeStateParts(train, full, ranks->rank(), ranks->size(),
                   memory.optimizerState);
    return;
  }
  for (int i = 0; i < train.numArguments; ++i) {
    const ArgumentInfo &a = train.arguments[i];
    if (!isPersistentRole(a.role))
      continue;
    InitSpec spec = initSpecOf(a.init);
    // The plan's memory starts zeroed: zeros need no writing, and a tensor
    // that is not f32 (adamw8bit's codes) can only be zeros.
    if (spec.kind == "zeros")
      continue;
    if (std::string(a.dtype) != "f32")
      fail(std::string(a.name) + ": a " + a.dtype +
           " tensor cannot be initialized by " + spec.kind);
    std::vector<int64_t> shape(a.shape, a.shape + a.rank);
    Rng rng = rngFor(position.seed, a.name);
    uint8_t *base = memory.base(a.region);
    if (!initialize(spec, shape, rng,
                    reinterpret_cast<float *>(base + a.offset), error))
      fail(std::string(a.name) + ": " + error);
  }
  if (!options.init.empty())
    applyCheckpoint(init, model, memory);
}

/// The run's length: --steps, --epochs, the model's train section, or the
/// interrupted run's that --resume continues.
void TrainingRun::decideLength() {
  nlohmann::json settings = nlohmann::json::parse(model.train, nullptr, false);
  auto setting = [&](const char *name) -> int64_t {
    if (settings.is_object() && settings.contains(name) &&
        settings[name].is_number_integer())
      return settings[name].get<int64_t>();
    return 0;
  };
  perEpoch = source->stepsPerEpoch();
  totalSteps = options.steps;
  if (!totalSteps) {
    int64_t epochs = options.epochs ? options.epochs : setting("epochs");
    if (!epochs && setting("steps")) {
      totalSteps = setting("steps");
    } else {
      epochs = std::max<int64_t>(1, epochs);
      if (epochs > INT64_MAX / std::max<int64_t>(1, perEpoch))
        fail(std::to_string(epochs) + " epochs of " + std::to_string(perEpoch) +
             " steps do not fit the step counter (at most 2^63 - 1 steps)");
      totalSteps = epochs * perEpoch;
    }
  }
  if (!options.resume.empty() && !options.steps && !options.epochs &&
      position.totalSteps > 0)
    totalSteps = position.totalSteps; // the interrupted run's length
  firstStep = position.step + 1;
  lastStep = totalSteps;
  if (options.stopAfter && options.stopAfter < lastStep - position.step)
    lastStep = position.step + options.stopAfter;
  if (firstStep > totalSteps)
    fail("the checkpoint is at step " + std::to_string(position.step) +
         ", past this run's " + std::to_string(totalSteps) + " steps");
  step = firstStep - 1;
}

/// Where the steps run: the GPU when there is one (or when asked), else the
/// CPU; the trainer says which, and why not the GPU.
void TrainingRun::startDevice() {
  options.devices.cuda.device = ranks->localRank();
  if (!runtime::startDevice(model, options.devices, device, error))
    fail(error);
  if (DeviceExecutor *executor = device.executor.get()) {
    if (!executor->upload(memory, error))
      fail(error);
    // A data-parallel plan (one rank too: mnemoc --world-size 1 runs the
    // device's collectives alone).
    if (train.numGradientBuckets > 0 && !executor->joinRanks(*ranks, error))
      fail(error);
  }
  if (ranks->size() > 1)
    device.description +=
        "; " + ranks->describe() + ", each with these threads";
}

void TrainingRun::printStart() const {
  std::printf("device: %s\n", device.description.c_str());
  DeviceExecutor *executor = device.executor.get();
  for (const std::string &sites :
       {cpu::convolutionSummary(), cpu::matmulSummary()})
    if (!executor && !sites.empty())
      std::printf("%s\n", sites.c_str());
  const PlanRegions &regions = plan.regions();
  if (executor)
    std::printf("memory: %s on the GPU (%s measured by cudaMemGetInfo)\n",
                executor->allocationSummary().c_str(),
                mib(executor->measuredDeviceBytes()).c_str());
  else
    std::printf("memory: %s allocated once = arena %s + parameters %s + "
                "gradients %s + optimizer state %s + batch %s + workspace "
                "%s%s\n",
                mib(plan.bytes()).c_str(), mib(regions.arena).c_str(),
                mib(regions.parameters).c_str(), mib(regions.gradients).c_str(),
                mib(regions.optimizerState).c_str(),
                mib(regions.inputs).c_str(), mib(regions.workspace).c_str(),
                regions.buffers ? (" + buffers " + mib(regions.buffers)).c_str()
                                : "");
  std::printf("training steps %lld to %lld of %lld (%lld per epoch, batch "
              "%lld%s)\n",
              (long long)firstStep, (long long)lastStep, (long long)totalSteps,
              (long long)perEpoch,
              (long long)(trainBatch.batchSize * ranks->size()),
              ranks->size() > 1
                  ? (": " + std::to_string(trainBatch.batchSize) +
                     " on each of " + std::to_string(ranks->size()) + " ranks")
                        .c_str()
                  : "");
  std::fflush(stdout);
}

void TrainingRun::trainSteps() {
  progress = std::make_unique<Progress>(firstStep, lastStep, perEpoch,
                                        trainBatch.batchSize, options.quiet);
  Prefetcher prefetcher(*source, plan.regions().inputs, firstStep, lastStep);
  losses.reserve(lastStep - firstStep + 1);
  stepMs.reserve(lastStep - firstStep + 1);
  // f16 training scales its loss (its optimizer state has the scale).
  for (int i = 0; i < train.numArguments; ++i)
    lossScaling |= std::strcmp(train.arguments[i].name, "loss_scale") == 0;
  const ArgumentInfo *stepArg = argumentWithRole(train, ArgumentRole::Step);
  const ArgumentInfo *totalArg =
      argumentWithRole(train, ArgumentRole::TotalSteps);
  FetchBatch fetch = [&](int64_t s, uint8_t *inputs, std::string &why) {
    if (!prefetcher.take(s, inputs, trainBatch, why))
      return false;
    // 64-bit: a run may be longer than 2^31 steps.
    int64_t stepValue = s, totalValue = totalSteps;
    std::memcpy(inputs + stepArg->offset, &stepValue, 8);
    std::memcpy(inputs + totalArg->offset, &totalValue, 8);
    return true;
  };
  for (int64_t s = firstStep; s <= lastStep; ++s) {
    runStep(s, fetch);
    afterStep(s);
    if (interrupted)
      break;
  }
  progress->finish();
  rssPeak = statusKb("VmHWM") * 1024;
  if (skippedSteps)
    std::printf("f16 loss scaling skipped %lld of %lld steps (their "
                "gradients overflowed)\n",
                (long long)skippedSteps, (long long)(step - firstStep + 1));
}

/// Step `s` on the device or the CPU, timed, its batch recorded for --dump.
void TrainingRun::runStep(int64_t s, const FetchBatch &fetch) {
  // The first step's times include first-touch effects (and on the GPU,
  // choosing algorithms): not profiled.
  double *profileInto =
      options.profile && s > firstStep ? opSeconds.data() : nullptr;
  ranks->setStep(s);
  auto begin = std::chrono::steady_clock::now();
  if (device.executor) {
    if (!device.executor->train(s, lastStep, fetch, memory, profileInto, error))
      fail("step " + std::to_string(s) + ": " + error);
  } else {
    if (!fetch(s, memory.inputs, error))
      fail(error);
    begin = std::chrono::steady_clock::now();
    memory.opSeconds = profileInto;
    {
      cpu::StepScope scope;
      train.run(memory, s);
    }
    memory.opSeconds = nullptr;
  }
  stepMs.push_back(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - begin)
                       .count());
  std::string kernelError = cpu::takeError();
  if (!kernelError.empty())
    fail("step " + std::to_string(s) + ": " + kernelError);
  if (dump)
    dump->recordBatch(trainBatch, memory, s - firstStep + 1);
}

/// Step `s`'s loss: recorded, checked, shown; an epoch's end summarized
/// (and evaluated with --eval).
void TrainingRun::afterStep(int64_t s) {
  double loss = resultOf(train, memory, "loss");
  double skipped = resultOf(train, memory, "skipped");
  if (ranks->size() > 1) {
    // The global batch's mean loss (each rank's is its rows' mean), and
    // one decision to stop: a rank interrupted stops them all after this
    // step, as they must take part in every step's sums.
    double shared[3] = {loss, skipped, double(interrupted != 0)};
    ranks->sum(shared, 3);
    loss = shared[0] / double(ranks->size());
    skipped = shared[1];
    if (shared[2] > 0 && !interrupted)
      interrupted = SIGTERM;
  }
  // f16 loss scaling: a step whose scaled gradients overflowed updated
  // nothing (and halved the scale).
  if (skipped > 0)
    ++skippedSteps;
  if (!std::isfinite(loss)) {
    // f16 with loss scaling skips a step whose gradients overflowed and
    // carries on with a smaller scale; in f32 and bf16 a non-finite loss
    // has already made this step's update non-finite, and every later step
    // would train on it.
    if (!lossScaling) {
      progress->finish();
      fail("the loss is " + std::string(std::isnan(loss) ? "nan" : "inf") +
           " at step " + std::to_string(s) +
           ": training stopped, and nothing was saved (this step's update "
           "is not finite either; a lower learning rate, a warm-up or "
           "clip_grad_norm may help)");
    }
    if (!nanReported)
      progress->print("warning: the loss is " + std::to_string(loss) +
                      " at step " + std::to_string(s));
    nanReported = true;
  }
  losses.push_back(loss);
  step = s;
  epochLoss += loss;
  ++epochSteps;
  progress->update(s, loss);
  if (s % perEpoch == 0 || s == totalSteps) {
    char line[160];
    std::snprintf(line, sizeof(line),
                  "epoch %lld  mean loss %.4f  (%lld steps)",
                  (long long)((s - 1) / perEpoch + 1),
                  epochLoss / double(epochSteps), (long long)epochSteps);
    progress->print(line);
    epochLoss = 0;
    epochSteps = 0;
    if (options.eval)
      progress->print(evaluate(s));
  }
}

/// The eval step over the held-out data after step `afterStep`: its line,
/// and an entry of the summary's evaluations.
std::string TrainingRun::evaluate(int64_t afterStep) {
  int64_t batches = source->evalBatches();
  if (!eval.run || batches == 0)
    return "no held-out data to evaluate on";
  // Ranks evaluate every ranks-th batch and add up.
  double sums[2] = {0, 0};
  for (int64_t b = ranks->rank(); b < batches; b += ranks->size()) {
    if (!source->evalBatch(b, memory.inputs, error))
      fail(error);
    if (device.executor) {
      if (!device.executor->eval(memory, error))
        fail("evaluation: " + error);
    } else {
      eval.run(memory, 0);
    }
    std::string kernelError = cpu::takeError();
    if (!kernelError.empty())
      fail("evaluation: " + kernelError);
    sums[0] += resultOf(eval, memory, "loss");
    sums[1] += resultOf(eval, memory, "accuracy");
  }
  ranks->sum(sums, 2);
  double loss = sums[0] / double(batches);
  double accuracy = sums[1] / double(batches);
  int64_t examples = batches * evalBatch.batchSize;
  evaluations.push_back({{"step", afterStep},
                         {"loss", loss},
                         {"accuracy", accuracy},
                         {"examples", examples}});
  char line[160];
  std::snprintf(line, sizeof(line),
                "test  loss %.4f  accuracy %.4f  (%lld examples)", loss,
                accuracy, (long long)examples);
  return line;
}

/// ZeRO-1: rank 0 gathers the optimizer state whole, for a checkpoint that
/// one process (and any world size) resumes.
void TrainingRun::gatherShardedState() {
  if (!train.shardBytes)
    return;
  // Each rank's parts from its device (and the parameters, for what
  // follows: the state must not be downloaded again once it is whole).
  if (device.executor && !device.executor->download(memory, error))
    fail(error);
  std::vector<uint8_t> parts;
  ranks->gatherState(memory.optimizerState, plan.regions().optimizerState,
                     parts);
  if (ranks->leader()) {
    fullState.resize(fullStateBytes(train));
    joinStateParts(train, parts, ranks->size(), fullState.data());
    memory.optimizerState = fullState.data();
  }
}

/// Rank 0's outputs. They were checked before step 1; a write can still
/// fail (a full disk). Each failure is reported, the others are still
/// written, and the trained state is never lost: without a checkpoint at
/// --save, one goes to a new file elsewhere.
int TrainingRun::writeOutputs() {
  position.step = step;
  position.totalSteps = totalSteps;
  position.threads = cpu::threads();
  position.globalBatch = trainBatch.batchSize * ranks->size();
  position.ranks = ranks->size();
  savePath = options.save;
  if (step < totalSteps && savePath.empty()) {
    // Interrupted without --save: a new file, never an existing one.
    savePath = std::string(model.name) + "-step" + std::to_string(step) +
               ".safetensors";
    for (int n = 1; fileExists(savePath); ++n)
      savePath = std::string(model.name) + "-step" + std::to_string(step) +
                 "-" + std::to_string(n) + ".safetensors";
  }
  // The device's parameters and optimizer state, for the checkpoint, the
  // dump and the pruning report (under ZeRO-1, downloaded before the
  // gather).
  std::vector<MaskSparsity> sparsity = maskSparsity(model, nullptr);
  if (device.executor && !train.shardBytes &&
      (!savePath.empty() || dump || !sparsity.empty() ||
       !options.exportPath.empty()) &&
      !device.executor->download(memory, error))
    fail(error);
  sparsity = maskSparsity(model, &memory);
  for (const MaskSparsity &m : sparsity)
    std::printf("pruned: %-24s %6.2f%% (%lld of %lld)\n", m.weight.c_str(),
                100.0 * double(m.pruned) / double(m.elements),
                (long long)m.pruned, (long long)m.elements);
  std::vector<std::string> writeErrors;
  saveCheckpoint(writeErrors);
  exportWeights(writeErrors);
  if (dump)
    dump->write(options.dump, memory, losses, totalSteps, writeErrors);
  writeSummary(sparsity, writeErrors);
  if (!writeErrors.empty()) {
    for (const std::string &e : writeErrors)
      std::fprintf(stderr, "train: error: %s\n", e.c_str());
    if (!stateSaved)
      rescueState();
    return 1;
  }
  // 128 + the signal (130 for Ctrl-C, 143 for SIGTERM), as for any program
  // a signal stopped, so that scripts can tell an interrupted run (its
  // checkpoint saved) from a finished one.
  return exitStatus();
}

void TrainingRun::saveCheckpoint(std::vector<std::string> &writeErrors) {
  if (savePath.empty())
    return;
  if (!runtime::saveCheckpoint(savePath, model, memory, position, error)) {
    writeErrors.push_back(error);
    return;
  }
  stateSaved = true;
  std::printf("%s at step %lld: checkpoint written to %s\n",
              step < totalSteps ? (interrupted ? "interrupted" : "stopped")
                                : "finished",
              (long long)step, savePath.c_str());
}

void TrainingRun::exportWeights(std::vector<std::string> &writeErrors) {
  if (options.exportPath.empty())
    return;
  ExportSummary exported;
  if (!runtime::exportWeights(options.exportPath, model, memory, exported,
                              error)) {
    writeErrors.push_back(error);
    return;
  }
  for (const std::string &line : exported.lines)
    std::printf("export: %s\n", line.c_str());
  std::printf("export: parameters %lld bytes as trained, %lld exported "
              "(%.2fx smaller), written to %s\n",
              (long long)exported.denseBytes, (long long)exported.exportedBytes,
              double(exported.denseBytes) /
                  double(std::max<int64_t>(exported.exportedBytes, 1)),
              options.exportPath.c_str());
}

/// --summary-json: the run's figures (losses, speed, memory).
void TrainingRun::writeSummary(const std::vector<MaskSparsity> &sparsity,
                               std::vector<std::string> &writeErrors) {
  if (options.summaryJson.empty())
    return;
  std::vector<double> sorted = stepMs;
  std::sort(sorted.begin(), sorted.end());
  const PlanRegions &regions = plan.regions();
  nlohmann::json summary;
  summary["model"] = model.name;
  summary["first_step"] = firstStep;
  summary["last_step"] = step;
  summary["total_steps"] = totalSteps;
  summary["threads"] = cpu::threads();
  summary["device"] = device.description;
  summary["skipped_steps"] = skippedSteps;
  summary["batch_size"] = trainBatch.batchSize;
  summary["losses"] = losses;
  summary["final_loss"] = losses.empty() ? NAN : losses.back();
  summary["step_ms_median"] = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  summary["examples_per_second"] = progress->examplesPerSecond();
  summary["evaluations"] = evaluations;
  summary["sparsity"] = nlohmann::json::object();
  for (const MaskSparsity &m : sparsity)
    summary["sparsity"][m.weight] = {{"pruned", m.pruned},
                                     {"elements", m.elements}};
  summary["memory"] = {
      {"allocated_bytes", plan.bytes()},
      {"arena_bytes", regions.arena},
      {"parameter_bytes", regions.parameters},
      {"buffer_bytes", regions.buffers},
      {"gradient_bytes", regions.gradients},
      {"optimizer_state_bytes", regions.optimizerState},
      {"input_bytes", regions.inputs},
      {"workspace_bytes", regions.workspace},
      {"prefetch_bytes", 2 * regions.inputs},
      {"rss_before_bytes", rssBefore},
      {"rss_peak_bytes", rssPeak},
      {"rss_growth_bytes", rssPeak - rssBefore},
      {"allocations_during_steps", stepAllocations.load()},
      {"library_allocations_during_steps", libraryAllocations.load()}};
  if (device.executor) {
    summary["memory"]["device_allocated_bytes"] =
        device.executor->allocatedBytes();
    summary["memory"]["device_measured_bytes"] =
        device.executor->measuredDeviceBytes();
  }
  std::string text = summary.dump(2) + "\n";
  if (!writeAtomically(options.summaryJson, {{text.data(), text.size()}},
                       error))
    writeErrors.push_back(error);
}

/// The trained state in a new file when its checkpoint could not be
/// written.
void TrainingRun::rescueState() const {
  std::string why;
  std::string rescued = rescueCheckpoint(model, memory, position, why);
  if (rescued.empty())
    std::fprintf(stderr,
                 "train: error: the trained state could not be saved "
                 "anywhere either: %s\n",
                 why.c_str());
  else
    std::fprintf(stderr,
                 "train: the trained state (step %lld) is saved in '%s'; "
                 "train --resume it, or --init from it\n",
                 (long long)step, rescued.c_str());
}

} // namespace

int main(int argc, char **argv) {
  TrainingRun run(parseOptions(argc, argv));
  return run.run();
}
