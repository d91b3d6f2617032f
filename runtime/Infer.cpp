//===- Infer.cpp - The inference program's main ---------------------------===//
//
// What `mnemoc --mode=inference MODEL.mn -o DIR` builds as DIR/infer: the
// model's forward with its loss and metrics (@eval_step) over the test
// split, on weights `train --export` wrote. The plan holds no gradients
// and no optimizer state; its weights are the compressed ones, loaded by a
// checked copy (runtime/InferenceWeights.h).
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/convolution/ConvolutionKernels.h"
#include "runtime/Data.h"
#include "runtime/Executor.h"
#include "runtime/InferenceWeights.h"
#include "runtime/Model.h"
#include "runtime/OutputFiles.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace mnemo;
using namespace mnemo::runtime;

namespace {

const char *const kUsage = R"(usage: infer --weights FILE --data PATH [options]

Evaluates the model this program was compiled from (mnemoc --mode=inference
MODEL.mn -o DIR) on the test split of PATH, forward only, with the weights
`train --export FILE` wrote (int8/int4 with scales, 2:4-packed, CSR), or a
checkpoint's dense weights, compressed on load by the same rules.

  --weights FILE       the weights: an export or a checkpoint (safetensors)
  --data PATH          a directory of IDX files (Fashion-MNIST: t10k-*), of
                       named arrays (its test split: test.safetensors or
                       test/NAME.npy), or a token file (its held-out windows)
  --batches N          evaluate the first N test batches only
  --threads T          worker threads and OpenBLAS threads (default: all cores)
  --device cuda|cpu    where the steps run (default: the GPU when there is one)
  --matmul-precision high|highest
                       f32 GEMMs and convolutions on the GPU: high (default,
                       TF32 tensor cores, as PyTorch's "high") or highest
                       (full f32)
  --summary-json FILE  write the figures (loss, accuracy, speed, memory) as JSON
)";

struct Options {
  CudaSettings cuda;
  std::string weights, data, device, summaryJson;
  int64_t batches = 0;
  int threads = 0;
};

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "infer: error: %s\n", message.c_str());
  std::exit(1);
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail(arg + " needs a value");
      return argv[++i];
    };
    auto number = [&](long long max) {
      std::string text = value();
      char *end = nullptr;
      errno = 0;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end || errno || v < 1 || v > max)
        fail(arg + " needs a whole number from 1 to " + std::to_string(max) +
             ", not '" + text + "'");
      return int64_t(v);
    };
    auto path = [&]() {
      std::string text = value();
      if (text.empty())
        fail(arg + " needs a path, not ''");
      return text;
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--weights") {
      o.weights = path();
    } else if (arg == "--data") {
      o.data = path();
    } else if (arg == "--batches") {
      o.batches = number(LLONG_MAX);
    } else if (arg == "--threads") {
      o.threads = int(number(cpu::kMaxThreads));
    } else if (arg == "--summary-json") {
      o.summaryJson = path();
    } else if (arg == "--matmul-precision") {
      std::string precision = value();
      if (!parseMatmulPrecision(precision, o.cuda))
        fail("--matmul-precision is high or highest, not '" + precision + "'");
    } else if (arg == "--device") {
      o.device = value();
      if (o.device != "cuda" && o.device != "cpu")
        fail("--device is cuda or cpu, not '" + o.device + "'");
    } else {
      fail("unknown option '" + arg + "' (see --help)");
    }
  }
  if (o.weights.empty())
    fail("--weights is required: the file `train --export FILE` wrote, or "
         "a checkpoint (see --help)");
  if (o.data.empty())
    fail("--data is required (see --help)");
  return o;
}

} // namespace

int main(int argc, char **argv) {
  Options options = parseOptions(argc, argv);
  const ModelInfo &model = *mnemoModel();
  const StepInfo &eval = model.evalStep;
  if (!eval.run)
    fail("this program was compiled without an evaluation step");
  std::string error;
  if (!cpu::setThreads(options.threads, error))
    fail(error);
  // The convolutions' primitives, for these threads, before any step.
  cpu::prepareConvolutions(cpu::threads());
  BatchLayout batch = batchLayoutOf(eval);
  std::unique_ptr<BatchSource> source =
      openBatchSource(options.data, batch, batch, 0, error);
  if (!source)
    fail(error);
  if (source->evalBatches() == 0)
    fail(options.data + " has no test split to evaluate on");
  if (!options.summaryJson.empty()) {
    std::vector<NamedFile> inputs = {{"--weights", options.weights},
                                     {"--data", options.data}};
    for (const std::string &file : source->files())
      inputs.push_back({"--data", file});
    if (!checkOutputs({{"--summary-json", options.summaryJson}}, {}, inputs,
                      error))
      fail(error);
    removeStaleTemporaries(options.summaryJson);
  }

  // One allocation for the plan: weights, batch, arena.
  PlanRegions regions = regionsOf(model);
  int64_t allocated = regions.total();
  uint8_t *block = static_cast<uint8_t *>(std::aligned_alloc(
      4096, std::max<int64_t>(4096, (allocated + 4095) / 4096 * 4096)));
  if (!block)
    fail("cannot allocate the plan's " + mib(allocated));
  std::memset(block, 0, allocated);
  StepMemory memory{};
  placeRegions(block, regions, memory);
  // The device first: a plan it cannot run is reported before the weights
  // are read.
  std::unique_ptr<DeviceExecutor> executor;
  std::string noGpu;
  bool gpu = cudaDeviceAvailable(noGpu);
  if (options.device == "cuda" && !gpu)
    fail("--device cuda: " + noGpu);
  std::string noCpu;
  if ((options.device == "cpu" || !gpu) && !cpu::backendAvailable(noCpu))
    fail(options.device == "cpu"
             ? "--device cpu: " + noCpu
             : "no device to run on: " + noGpu + "; and " + noCpu);
  if (gpu && options.device != "cpu") {
    executor = makeCudaExecutor(model, options.cuda, error);
    if (!executor)
      fail("the CUDA backend: " + error);
  }
  LoadedWeights weights;
  if (!loadInferenceWeights(options.weights, model, memory, weights, error))
    fail(error);
  if (executor && !executor->upload(memory, error))
    fail(error);
  std::string device =
      executor
          ? executor->describe()
          : "CPU, " + std::to_string(cpu::threads()) + " threads" +
                (options.device == "cpu" ? std::string() : " (" + noGpu + ")");
  std::printf("model %s (%s), %s\n", model.name, model.sourceFile,
              source->describe().c_str());
  std::printf("device: %s\n", device.c_str());
  std::printf("memory: %s allocated once = weights %s + batch %s + arena %s "
              "+ workspace %s (no gradients, no optimizer state)\n",
              mib(allocated).c_str(),
              mib(regions.parameters + regions.buffers).c_str(),
              mib(regions.inputs).c_str(), mib(regions.arena).c_str(),
              mib(regions.workspace).c_str());
  for (const std::string &line : weights.compressedOnLoad)
    std::printf("on load: %s\n", line.c_str());
  for (const std::string &line : weights.layouts)
    std::printf("weight %s\n", line.c_str());
  std::fflush(stdout);

  int64_t batches = source->evalBatches();
  if (options.batches)
    batches = std::min(batches, options.batches);
  double lossSum = 0, accuracySum = 0;
  std::vector<double> batchMs;
  batchMs.reserve(size_t(batches));
  for (int64_t b = 0; b < batches; ++b) {
    if (!source->evalBatch(b, memory.inputs, error))
      fail(error);
    auto start = std::chrono::steady_clock::now();
    if (executor) {
      if (!executor->eval(memory, error))
        fail(error);
    } else {
      cpu::StepScope scope;
      eval.run(memory, 0);
    }
    batchMs.push_back(1e3 * std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count());
    std::string kernelError = cpu::takeError();
    if (!kernelError.empty())
      fail("batch " + std::to_string(b) + ": " + kernelError);
    lossSum += resultOf(eval, memory, "loss");
    accuracySum += resultOf(eval, memory, "accuracy");
  }
  double loss = lossSum / double(batches);
  double accuracy = accuracySum / double(batches);
  int64_t examples = batches * batch.batchSize;
  // The median: the first batches warm the caches (and the device).
  std::sort(batchMs.begin(), batchMs.end());
  double msPerBatch = batchMs[batchMs.size() / 2];
  std::printf("test  loss %.4f  accuracy %.4f  (%lld examples)  %.3f ms per "
              "batch of %lld (median)\n",
              loss, accuracy, (long long)examples, msPerBatch,
              (long long)batch.batchSize);
  if (!options.summaryJson.empty()) {
    nlohmann::json summary = {{"model", model.name},
                              {"device", device},
                              {"loss", loss},
                              {"accuracy", std::isnan(accuracy)
                                               ? nlohmann::json()
                                               : nlohmann::json(accuracy)},
                              {"examples", examples},
                              {"ms_per_batch", msPerBatch},
                              {"memory",
                               {{"allocated_bytes", allocated},
                                {"weight_bytes", regions.parameters},
                                {"batch_bytes", regions.inputs},
                                {"arena_bytes", regions.arena},
                                {"workspace_bytes", regions.workspace}}}};
    std::string text = summary.dump(2) + "\n";
    if (!writeAtomically(options.summaryJson, {{text.data(), text.size()}},
                         error))
      fail(error);
  }
  std::free(block);
  return 0;
}
