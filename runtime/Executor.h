//===- Executor.h - Where the trainer runs its steps ------------*- C++ -*-===//
//
// The trainer keeps the run's state (parameters, optimizer state, the
// batch, the results) in host memory laid out as the plan says. On the CPU
// the steps run there. A device executor holds the plan in device memory
// instead: it uploads the state once, runs each step there, brings back the
// results every step and the state when the trainer saves.
//
// Part of the runtime: no LLVM, and no CUDA header (the CUDA executor's
// implementation is runtime/cuda/CudaExecutor.cu).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_EXECUTOR_H
#define MNEMO_RUNTIME_EXECUTOR_H

#include "runtime/Model.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace mnemo::runtime {

/// The sizes of the plan's regions (the largest of the train and eval
/// steps').
struct PlanRegions {
  int64_t parameters = 0, gradients = 0, optimizerState = 0, inputs = 0,
          arena = 0, workspace = 0, buffers = 0;
  int64_t total() const {
    return parameters + gradients + optimizerState + inputs + arena +
           workspace + buffers;
  }
};
PlanRegions regionsOf(const ModelInfo &model);
/// "12.34 MiB".
std::string mib(int64_t bytes);
/// The f32 scalar result `name` (loss, accuracy, ...) of `step`, read from
/// the arena; NaN when the step has no such result.
float resultOf(const StepInfo &step, const StepMemory &memory,
               const char *name);
/// Points `memory`'s regions into `block`, one after the other (the one
/// allocation of regions.total() bytes); leaves opSeconds alone.
void placeRegions(uint8_t *block, const PlanRegions &regions,
                  StepMemory &memory);

/// Fills `inputs` (the batch region, inputs bytes) with the batch of train
/// step `step` and its step counters.
using FetchBatch =
    std::function<bool(int64_t step, uint8_t *inputs, std::string &error)>;

class Ranks;

class DeviceExecutor {
public:
  virtual ~DeviceExecutor() = default;
  /// "CUDA: NVIDIA H200 (sm_90, 132 SMs)".
  virtual std::string describe() const = 0;
  /// The one device allocation, and what it holds beyond the plan.
  virtual int64_t allocatedBytes() const = 0;
  virtual std::string allocationSummary() const = 0;
  /// Device memory in use by this process beyond what it held before the
  /// executor started (cudaMemGetInfo): the allocation plus the context's
  /// and libraries' own.
  virtual int64_t measuredDeviceBytes() = 0;

  /// Parameters and optimizer state, host to device and back.
  virtual bool upload(const StepMemory &host, std::string &error) = 0;
  virtual bool download(StepMemory &host, std::string &error) = 0;

  /// Runs train step `step` of `lastStep`: fetches its batch (unless it was
  /// staged while the previous step ran), stages the next step's batch
  /// while this one computes, and returns with the step's results at their
  /// offsets in host.arena and its batch in host.inputs. With `opSeconds`,
  /// times every op (no graph).
  virtual bool train(int64_t step, int64_t lastStep, const FetchBatch &fetch,
                     StepMemory &host, double *opSeconds,
                     std::string &error) = 0;
  /// The eval step on the batch in host.inputs; results into host.arena.
  virtual bool eval(StepMemory &host, std::string &error) = 0;

  /// A data-parallel run (runtime/Ranks.h): the train step's gradient
  /// buckets are summed with the other ranks'. False with `error` where
  /// this executor cannot.
  virtual bool joinRanks(Ranks &ranks, std::string &error) = 0;

  /// The op names of the device's train step (for --profile).
  virtual int numTrainOps() const = 0;
  virtual const char *const *trainOpNames() const = 0;
};

/// True when this trainer was built with the CUDA backend.
bool cudaBuiltIn();
/// Whether a usable CUDA device is present; `why` says why not.
bool cudaDeviceAvailable(std::string &why);
/// How the CUDA executor computes what has a choice.
struct CudaSettings {
  /// f32 matrix products and convolutions on the tensor cores in TF32 (10
  /// mantissa bits in, f32 accumulation), as PyTorch's default for
  /// convolutions and its torch.set_float32_matmul_precision("high");
  /// false: full f32 ("highest"). --matmul-precision sets it.
  bool tf32 = true;
  /// The GPU this process uses (modulo the machine's GPUs): a
  /// data-parallel rank's place among the ranks on its machine, so that
  /// each has its own.
  int device = 0;
};
/// The "--matmul-precision" option's value as settings: "high" (TF32) or
/// "highest" (f32); false for anything else.
inline bool parseMatmulPrecision(const std::string &value,
                                 CudaSettings &settings) {
  if (value != "high" && value != "highest")
    return false;
  settings.tf32 = value == "high";
  return true;
}
/// The CUDA executor for the model: compiles its kernels, allocates the
/// plan. Null with `error` when something fails.
std::unique_ptr<DeviceExecutor> makeCudaExecutor(const ModelInfo &model,
                                                 const CudaSettings &settings,
                                                 std::string &error);

/// Where a program's steps run, as its options say (runtime/CommandLine.h
/// reads them).
struct DeviceOptions {
  /// "cuda", "cpu", or "" for the GPU when there is one.
  std::string device;
  CudaSettings cuda;
  /// Worker threads; 0 for the default (cpu::setThreads).
  int threads = 0;
};

/// The device the steps run on: the GPU when there is one (or when
/// --device cuda asks for it), else the CPU.
struct Device {
  /// Null on the CPU.
  std::unique_ptr<DeviceExecutor> executor;
  /// The "device:" line: "CUDA: NVIDIA H200 (...)", or "CPU, 2 threads"
  /// and why not the GPU when nobody chose the CPU.
  std::string description;
};
/// Chooses and starts the device for the model after cpu::setThreads; false
/// with `error` when the device asked for (or either, when none was) cannot
/// run it.
bool startDevice(const ModelInfo &model, const DeviceOptions &options,
                 Device &device, std::string &error);

/// The host's one allocation of the plan's regions, zeroed: the pages are
/// resident before the first step, and the steps allocate nothing.
class HostPlanMemory {
public:
  explicit HostPlanMemory(const ModelInfo &model);
  ~HostPlanMemory();
  HostPlanMemory(const HostPlanMemory &) = delete;
  HostPlanMemory &operator=(const HostPlanMemory &) = delete;

  /// Allocates the block and points `memory`'s regions into it; false with
  /// `error` when it cannot be allocated.
  bool allocate(StepMemory &memory, std::string &error);
  const PlanRegions &regions() const { return sizes; }
  int64_t bytes() const { return sizes.total(); }

private:
  PlanRegions sizes;
  uint8_t *block = nullptr;
};

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_EXECUTOR_H
