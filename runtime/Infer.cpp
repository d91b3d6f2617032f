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
#include "lang/ops/matmul/MatmulKernels.h"
#include "runtime/CommandLine.h"
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
  DeviceOptions devices;
  std::string weights, data, summaryJson;
  int64_t batches = 0;
};

[[noreturn]] void fail(const std::string &message) {
  exitWithError("infer", message);
}

Options parseOptions(int argc, char **argv) {
  Options o;
  CommandLine args("infer", kUsage, argc, argv);
  while (args.next()) {
    if (args.deviceOption(o.devices))
      continue;
    if (args.is("--weights"))
      o.weights = args.path();
    else if (args.is("--data"))
      o.data = args.path();
    else if (args.is("--batches"))
      o.batches = args.number(1, INT64_MAX);
    else if (args.is("--summary-json"))
      o.summaryJson = args.path();
    else
      args.unknown();
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
  if (!cpu::setThreads(options.devices.threads, error))
    fail(error);
  // The convolutions' and 16-bit products' primitives, for these threads,
  // before any step.
  cpu::prepareConvolutions(cpu::threads());
  cpu::prepareMatmuls(cpu::threads());
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
  HostPlanMemory plan(model);
  StepMemory memory{};
  if (!plan.allocate(memory, error))
    fail(error);
  const PlanRegions &regions = plan.regions();
  // The device first: a plan it cannot run is reported before the weights
  // are read.
  Device device;
  if (!startDevice(model, options.devices, device, error))
    fail(error);
  LoadedWeights weights;
  if (!loadInferenceWeights(options.weights, model, memory, weights, error))
    fail(error);
  if (device.executor && !device.executor->upload(memory, error))
    fail(error);
  std::printf("model %s (%s), %s\n", model.name, model.sourceFile,
              source->describe().c_str());
  std::printf("device: %s\n", device.description.c_str());
  std::printf("memory: %s allocated once = weights %s + batch %s + arena %s "
              "+ workspace %s (no gradients, no optimizer state)\n",
              mib(plan.bytes()).c_str(),
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
    if (device.executor) {
      if (!device.executor->eval(memory, error))
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
                              {"device", device.description},
                              {"loss", loss},
                              {"accuracy", std::isnan(accuracy)
                                               ? nlohmann::json()
                                               : nlohmann::json(accuracy)},
                              {"examples", examples},
                              {"ms_per_batch", msPerBatch},
                              {"memory",
                               {{"allocated_bytes", plan.bytes()},
                                {"weight_bytes", regions.parameters},
                                {"batch_bytes", regions.inputs},
                                {"arena_bytes", regions.arena},
                                {"workspace_bytes", regions.workspace}}}};
    std::string text = summary.dump(2) + "\n";
    if (!writeAtomically(options.summaryJson, {{text.data(), text.size()}},
                         error))
      fail(error);
  }
  return 0;
}
