//===- CudaExecutor.cu - Running the planned step on a GPU ----------------===//
//
// The CUDA side of the trainer, host code only (compiled by nvcc):
//
// - Kernels: the model's generated kernel source is compiled by NVRTC for
//   the device's architecture (cached, runtime/cuda/Nvrtc.h) and loaded
//   with the driver API, reached through the runtime's entry-point query so
//   that the trainer starts on machines without a driver (and then runs on
//   the CPU).
// - Memory: one cudaMalloc holds every region of the plan, the CUDA
//   workspace the emitter sized (cuBLASLt, cuDNN, partial sums), a second
//   batch buffer and a small control block. Nothing else is allocated once
//   the first step has run.
// - Steps: the generated host function enqueues kernels, cuBLASLt GEMMs and
//   cuDNN convolutions on one stream. The first step runs eagerly (it picks
//   the GEMM and convolution algorithms); later steps replay a CUDA graph
//   captured from the second, one graph per batch buffer.
// - Batches: two pinned host buffers and two device buffers; while step s
//   computes, the batch of step s + 1 is fetched and copied on a second
//   stream into the other buffer.
// - Data parallelism (runtime/Ranks.h): the ranks form an NCCL communicator
//   (rank 0's id reaches the others through MPI). Each gradient bucket is
//   averaged over the ranks by ncclAllReduce on a third stream, which waits
//   for an event recorded where the step makes the bucket ready; the step's
//   stream waits for the sum's event where it first reads the bucket. The
//   collectives are part of the captured graph (NCCL 2.9 and later support
//   stream capture), so the sums overlap the rest of the backward in every
//   replay. A step that waits on its sums waits under the collective
//   timeout.
// - ZeRO-1 (the plan's shardBytes): a bucket is reduced to the ranks that
//   own its pieces (one ncclReduce per piece, in one NCCL group, averaged
//   in place), the gradient norm sums the ranks' sums of squares
//   (ncclAllReduce of one value), each rank updates its part (the
//   generated launches read the rank's rows of their tables), and the
//   parameters are all-gathered through the gradient region, which the
//   step no longer needs by then, and copied back.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/attention/AttentionCudnn.h"
#include "runtime/Executor.h"
#include "runtime/Failure.h"
#include "runtime/Ranks.h"
#include "runtime/cuda/CudaModel.h"
#include "runtime/cuda/DeviceLayout.h"
#include "runtime/cuda/Nvrtc.h"

#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#if MNEMO_HAVE_NCCL
#include <nccl.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace mnemo;
using namespace mnemo::runtime;
using namespace mnemo::cuda;

namespace {

/// The driver API functions the executor uses, looked up through the
/// runtime (no link-time dependency on libcuda).
struct Driver {
  CUresult (*moduleLoadData)(CUmodule *, const void *) = nullptr;
  CUresult (*moduleUnload)(CUmodule) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream, void **,
                           void **) = nullptr;
  CUresult (*getErrorString)(CUresult, const char **) = nullptr;

  bool load(std::string &error) {
    auto get = [&](const char *symbol, void **fn) {
      cudaDriverEntryPointQueryResult status;
      return cudaGetDriverEntryPointByVersion(symbol, fn, 12000,
                                              cudaEnableDefault,
                                              &status) == cudaSuccess &&
             status == cudaDriverEntryPointSuccess && *fn;
    };
    if (!get("cuModuleLoadData", reinterpret_cast<void **>(&moduleLoadData)) ||
        !get("cuModuleUnload", reinterpret_cast<void **>(&moduleUnload)) ||
        !get("cuModuleGetFunction",
             reinterpret_cast<void **>(&moduleGetFunction)) ||
        !get("cuLaunchKernel", reinterpret_cast<void **>(&launchKernel)) ||
        !get("cuGetErrorString", reinterpret_cast<void **>(&getErrorString)))
      return failWith(error, "the CUDA driver does not provide the module API");
    return true;
  }
  std::string message(CUresult r) const {
    const char *s = nullptr;
    if (getErrorString)
      getErrorString(r, &s);
    return s ? s : "CUDA driver error " + std::to_string(int(r));
  }
};

std::string mib(int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2f MiB", double(bytes) / (1 << 20));
  return buffer;
}

cudaDataType_t cudaType(DType t) {
  switch (t) {
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}
cudnnDataType_t cudnnType(DType t) {
  switch (t) {
  case DType::BF16:
    return CUDNN_DATA_BFLOAT16;
  case DType::F16:
    return CUDNN_DATA_HALF;
  default:
    return CUDNN_DATA_FLOAT;
  }
}

/// A GEMM site's cuBLASLt plan, made on its first call (and again for a
/// call whose pointers are less aligned than the plan assumed).
struct GemmPlan {
  bool ready = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
  /// The alignment (bytes, a power of two up to 256) the algorithm was
  /// chosen for: the least of every operand's address and batch stride.
  uint32_t alignment = 256;
  /// No algorithm took the fused epilogue: a plain GEMM, then
  /// mnemoBiasEpilogue.
  bool separateEpilogue = false;
  /// No algorithm took the int8 shape: mnemoGemmInt8.
  bool int8Kernel = false;
  /// An outer batch: one call over pointer arrays, or (when no algorithm
  /// takes them) a strided-batched call per outer index.
  bool pointerArrays = false;
};

/// What a cuBLASLt call is left at least, next to pointer tables.
constexpr int64_t kMinGemmWorkspace = 1 << 20;

/// The largest power of two up to 256 that divides every value.
uint32_t alignmentOf(std::initializer_list<uint64_t> values) {
  uint64_t bits = 256;
  for (uint64_t v : values)
    bits |= v;
  return uint32_t(bits & (~bits + 1));
}

void destroyGemmPlan(GemmPlan &plan) {
  if (plan.a)
    cublasLtMatrixLayoutDestroy(plan.a);
  if (plan.b)
    cublasLtMatrixLayoutDestroy(plan.b);
  if (plan.c)
    cublasLtMatrixLayoutDestroy(plan.c);
  if (plan.desc)
    cublasLtMatmulDescDestroy(plan.desc);
  plan = GemmPlan();
}

/// A convolution site's cuDNN descriptors and algorithm.
struct ConvPlan {
  bool ready = false;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
};

/// An attention problem's cuDNN plans (both, or neither: the forward's
/// dropout mask and the backward's must come from the same generator), and
/// the Philox offset on the device that keeps its dropout stream apart
/// from other sites' (the seed is the step).
struct AttentionPlans {
  std::unique_ptr<attention::CudnnAttentionPlan> forward, backward;
  int64_t *offset = nullptr;
  int64_t scratch = 0;
};

class CudaExecutor final : public DeviceExecutor, public StepLauncher {
public:
  CudaExecutor(const ModelInfo &model, const CudaModelInfo &cudaModel,
               const CudaSettings &settings)
      : model(model), cudaModel(cudaModel), settings(settings) {}
  ~CudaExecutor() override;

  bool start(std::string &error);

  // DeviceExecutor
  std::string describe() const override { return description; }
  int64_t allocatedBytes() const override { return allocation; }
  std::string allocationSummary() const override;
  int64_t measuredDeviceBytes() override;
  bool upload(const StepMemory &host, std::string &error) override;
  bool download(StepMemory &host, std::string &error) override;
  bool train(int64_t step, int64_t lastStep, const FetchBatch &fetch,
             StepMemory &host, double *opSeconds, std::string &error) override;
  bool eval(StepMemory &host, std::string &error) override;
  int numTrainOps() const override { return cudaModel.trainStep.numOps; }
  const char *const *trainOpNames() const override {
    return cudaModel.trainStep.opNames;
  }
  bool joinRanks(Ranks &ranks, std::string &error) override;

  // StepLauncher
  void launch(int kernel, uint32_t gridX, uint32_t gridY, uint32_t block,
              int64_t index, std::initializer_list<int64_t> site) override;
  void gemm(const GemmCall &call, const uint8_t *a, const uint8_t *b,
            uint8_t *c, const uint8_t *bias) override;
  void conv(const ConvCall &call, const uint8_t *first, const uint8_t *second,
            uint8_t *result) override;
  bool attention(const AttentionCall &call,
                 const AttentionTensors &tensors) override;
  void zero(uint8_t *p, int64_t bytes) override;
  void gradientsReady(int bucket) override;
  void awaitGradients(int bucket) override;
  void sumOverRanks(uint8_t *value) override;
  void gatherParameters() override;
  void beginOp(int op) override;
  void endOp(int op) override;

private:
  bool check(cudaError_t status, const char *what);
  bool checkStep(std::string &error);
  /// Waits for the step's stream: a data-parallel step under the
  /// collective timeout (its NCCL sums wait on the other ranks).
  bool finishStep(const char *what, std::string &error);
  bool readResults(const StepInfo &step, StepMemory &host, std::string &error);
  bool stage(int64_t step, const FetchBatch &fetch, std::string &error);
  void useSlot(int slot);
  void captureStep(int slot);
  bool planGemm(const GemmCall &call, GemmPlan &plan, uint32_t alignment,
                bool epilogue, bool pointerArrays);
  /// The cuBLASLt workspace of a call: the CUDA workspace less the pointer
  /// tables an outer batch keeps at its top.
  int64_t gemmWorkspace(const GemmCall &call) const;
  /// One cublasLtMatmul of a planned GEMM (a, b, c: matrices, or pointer
  /// tables in pointer-array mode).
  bool matmul(const GemmCall &call, GemmPlan &plan, const uint8_t *bias,
              const void *a, const void *b, void *c);
  /// One of Kernels.cuh's own kernels (the fallbacks), with arguments.
  void launchLibraryKernel(CUfunction function, uint32_t blocks,
                           uint32_t threads, void **args, const char *name);
  bool planConv(const ConvCall &call, ConvPlan &plan);
  /// cuDNN's handle, made at the first call that needs it: a model
  /// without convolutions or 16-bit attention runs where cuDNN is broken.
  bool haveCudnn(std::string &why);
  /// The cuDNN plans of an attention problem, or none (Mnemo's kernels).
  AttentionPlans &planAttention(const AttentionCall &call);

  const ModelInfo &model;
  const CudaModelInfo &cudaModel;
  const CudaSettings settings;
  /// The machine's GPUs (this process uses settings.device modulo them).
  int devices = 1;
  PlanRegions sizes;
  std::string description;
  Driver driver;
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;
  /// Kernels.cuh's fallbacks, in every module.
  CUfunction biasEpilogueKernel = nullptr, gemmInt8Kernel = nullptr,
             gemmPointersKernel = nullptr;
  cudaStream_t compute = nullptr, copy = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  std::vector<GemmPlan> gemms;
  std::vector<ConvPlan> convs;
  /// By problem (AttentionCall less its site and kind): forward and
  /// backward decide together.
  std::map<std::string, AttentionPlans> attentions;

  uint8_t *block = nullptr;
  int64_t allocation = 0, workspaceBytes = 0;
  int64_t freeBefore = 0;
  uint8_t *inputSlots[2] = {nullptr, nullptr};
  uint8_t *pinnedInputs[2] = {nullptr, nullptr};
  int64_t *pinnedControl = nullptr; // [2][kControlSlots], one per slot
  float *pinnedResults = nullptr;
  int64_t *pinnedErrors = nullptr;
  cudaEvent_t uploaded[2] = {nullptr, nullptr};
  int64_t stagedStep[2] = {-1, -1};
  /// The buffer of the last train step: free once it ran (eval uses it;
  /// the other may hold the next step's staged batch).
  int lastSlot = 0;
  cudaGraphExec_t graphs[2] = {nullptr, nullptr};
  /// Set when capture failed: every step runs eagerly.
  bool noGraphs = false;
  int64_t eagerSteps = 0;

  // Profiling: an event pair per op.
  std::vector<cudaEvent_t> opStart, opEnd;
  bool profiling = false;

  /// The first failure inside a launcher call (they cannot return one).
  std::string failure;

  // Data parallelism: the ranks, the communicator, the stream the sums run
  // on, and per bucket the events that order them with the step.
  Ranks *ranks = nullptr;
#if MNEMO_HAVE_NCCL
  ncclComm_t comm = nullptr;
  bool ncclCheck(ncclResult_t status, const char *what);
#endif
  cudaStream_t collectives = nullptr;
  std::vector<cudaEvent_t> bucketReady, bucketSummed;
};

bool CudaExecutor::check(cudaError_t status, const char *what) {
  if (status == cudaSuccess)
    return true;
  if (failure.empty())
    failure = std::string(what) + ": " + cudaGetErrorString(status);
  return false;
}

CudaExecutor::~CudaExecutor() {
  for (cudaGraphExec_t g : graphs)
    if (g)
      cudaGraphExecDestroy(g);
  for (GemmPlan &p : gemms)
    destroyGemmPlan(p);
  for (auto &entry : attentions)
    if (entry.second.offset)
      cudaFree(entry.second.offset);
  attentions.clear();
  for (ConvPlan &p : convs)
    if (p.ready) {
      cudnnDestroyTensorDescriptor(p.x);
      cudnnDestroyTensorDescriptor(p.y);
      cudnnDestroyFilterDescriptor(p.w);
      cudnnDestroyConvolutionDescriptor(p.conv);
    }
  for (cudaEvent_t e : opStart)
    cudaEventDestroy(e);
  for (cudaEvent_t e : opEnd)
    cudaEventDestroy(e);
  for (cudaEvent_t e : uploaded)
    if (e)
      cudaEventDestroy(e);
#if MNEMO_HAVE_NCCL
  if (comm)
    ncclCommDestroy(comm);
#endif
  for (cudaEvent_t e : bucketReady)
    cudaEventDestroy(e);
  for (cudaEvent_t e : bucketSummed)
    cudaEventDestroy(e);
  if (collectives)
    cudaStreamDestroy(collectives);
  if (lt)
    cublasLtDestroy(lt);
  if (dnn)
    cudnnDestroy(dnn);
  if (module)
    driver.moduleUnload(module);
  for (uint8_t *p : pinnedInputs)
    if (p)
      cudaFreeHost(p);
  if (pinnedControl)
    cudaFreeHost(pinnedControl);
  if (block)
    cudaFree(block);
  if (compute)
    cudaStreamDestroy(compute);
  if (copy)
    cudaStreamDestroy(copy);
}

bool CudaExecutor::start(std::string &error) {
  sizes = regionsOf(model);
  cudaDeviceProp props;
  if (!check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount"))
    return failWith(error, failure);
  int device = settings.device % std::max(devices, 1);
  if (!check(cudaSetDevice(device), "cudaSetDevice") ||
      !check(cudaGetDeviceProperties(&props, device),
             "cudaGetDeviceProperties") ||
      !check(cudaFree(nullptr), "creating the CUDA context"))
    return failWith(error, failure);
  std::string arch =
      "sm_" + std::to_string(props.major) + std::to_string(props.minor);
  description = std::string("CUDA: ") + props.name + " (" + arch + ", " +
                std::to_string(props.multiProcessorCount) + " SMs" +
                (devices > 1 ? ", GPU " + std::to_string(device) : "") + ")";
  if (!driver.load(error))
    return false;

  // Kernels: NVRTC (or the cache), then the module.
  CompiledKernels compiled;
  if (!compileKernels(cudaModel.kernelSource, arch, true, compiled, error))
    return false;
  CUresult loaded = driver.moduleLoadData(&module, compiled.cubin.data());
  if (loaded != CUDA_SUCCESS)
    return failWith(error, "cannot load the compiled kernels: " +
                               driver.message(loaded));
  functions.resize(cudaModel.numKernels);
  for (int k = 0; k < cudaModel.numKernels; ++k) {
    CUresult found = driver.moduleGetFunction(&functions[k], module,
                                              cudaModel.kernelNames[k]);
    if (found != CUDA_SUCCESS)
      return failWith(
          error, std::string("kernel ") + cudaModel.kernelNames[k] +
                     " is missing from the module: " + driver.message(found));
  }
  for (auto [name, function] :
       {std::make_pair("mnemoBiasEpilogue", &biasEpilogueKernel),
        std::make_pair("mnemoGemmInt8", &gemmInt8Kernel),
        std::make_pair("mnemoGemmPointers", &gemmPointersKernel)}) {
    CUresult found = driver.moduleGetFunction(function, module, name);
    if (found != CUDA_SUCCESS)
      return failWith(
          error, std::string("kernel ") + name +
                     " is missing from the module: " + driver.message(found));
  }
  description += compiled.fromCache
                     ? ", kernels from the cache"
                     : ", kernels compiled by NVRTC " + nvrtcVersion();
  if (compiled.cacheWasDamaged)
    std::fprintf(stderr,
                 "gpu: the cached kernels in %s were damaged (checksum); "
                 "compiled them again\n",
                 compiled.cachePath.c_str());

  if (!check(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
             "cudaStreamCreate") ||
      !check(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking),
             "cudaStreamCreate") ||
      !check(cudaEventCreateWithFlags(&uploaded[0], cudaEventDisableTiming),
             "cudaEventCreate") ||
      !check(cudaEventCreateWithFlags(&uploaded[1], cudaEventDisableTiming),
             "cudaEventCreate"))
    return failWith(error, failure);
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
    return failWith(error, "cannot create a cuBLASLt handle");
  // cuDNN's handle is made at the first convolution (planConv): a model
  // without one runs even where cuDNN is broken.

  // The one allocation.
  size_t freeBytes = 0, totalBytes = 0;
  cudaMemGetInfo(&freeBytes, &totalBytes);
  freeBefore = int64_t(freeBytes);
  DeviceLayout layout(sizes, cudaModel.workspaceBytes);
  workspaceBytes = layout.workspace;
  int64_t inputs = layout.inputs;
  allocation = layout.total();
  if (cudaMalloc(&block, size_t(allocation)) != cudaSuccess) {
    block = nullptr;
    error = "cannot allocate the plan's " + mib(allocation) + " on the GPU (" +
            mib(int64_t(freeBytes)) + " free)";
    return false;
  }
  layout.place(block, regions, inputSlots);
  // Zeroed on the step's stream, and done before the copy stream stages a
  // batch into it.
  if (!check(cudaMemsetAsync(block, 0, size_t(allocation), compute),
             "cudaMemset") ||
      !check(cudaStreamSynchronize(compute), "cudaMemset") ||
      !check(cudaMallocHost(&pinnedInputs[0], size_t(inputs)),
             "cudaMallocHost") ||
      !check(cudaMallocHost(&pinnedInputs[1], size_t(inputs)),
             "cudaMallocHost") ||
      !check(cudaMallocHost(&pinnedControl, 4096), "cudaMallocHost"))
    return failWith(error, failure);
  // Pinned scratch: per-slot control words, then results, then the error
  // words read back each step.
  pinnedResults = reinterpret_cast<float *>(pinnedControl + 2 * kControlSlots);
  pinnedErrors = reinterpret_cast<int64_t *>(pinnedControl + 64);
  gemms.resize(256);
  convs.resize(64);
  int ops = std::max(cudaModel.trainStep.numOps, 1);
  opStart.resize(ops);
  opEnd.resize(ops);
  for (int i = 0; i < ops; ++i)
    if (!check(cudaEventCreate(&opStart[i]), "cudaEventCreate") ||
        !check(cudaEventCreate(&opEnd[i]), "cudaEventCreate"))
      return failWith(error, failure);
  return true;
}

std::string CudaExecutor::allocationSummary() const {
  return mib(allocation) + " in one cudaMalloc = plan " +
         mib(sizes.total() - sizes.workspace) + " + CUDA workspace " +
         mib(workspaceBytes) + " + second batch buffer " +
         mib(deviceAligned(sizes.inputs)) + " + control " +
         mib(kDeviceAlignment);
}

int64_t CudaExecutor::measuredDeviceBytes() {
  size_t freeBytes = 0, totalBytes = 0;
  cudaMemGetInfo(&freeBytes, &totalBytes);
  return freeBefore - int64_t(freeBytes) + allocation;
}

void CudaExecutor::useSlot(int slot) { regions.inputs = inputSlots[slot]; }

// Parameters and optimizer state go through the step's stream, which is
// non-blocking (not ordered with the legacy stream's cudaMemcpy): the
// first step sees them uploaded, and a download sees the last step done.
bool CudaExecutor::upload(const StepMemory &host, std::string &error) {
  if (!check(cudaMemcpyAsync(regions.parameters, host.parameters,
                             size_t(sizes.parameters), cudaMemcpyHostToDevice,
                             compute),
             "uploading the parameters") ||
      !check(cudaMemcpyAsync(regions.optimizerState, host.optimizerState,
                             size_t(sizes.optimizerState),
                             cudaMemcpyHostToDevice, compute),
             "uploading the optimizer state") ||
      !check(cudaMemcpyAsync(regions.buffers, host.buffers,
                             size_t(sizes.buffers), cudaMemcpyHostToDevice,
                             compute),
             "uploading the buffers") ||
      // The host buffers are pageable and may change once this returns.
      !check(cudaStreamSynchronize(compute), "uploading the parameters"))
    return failWith(error, failure);
  return true;
}

bool CudaExecutor::download(StepMemory &host, std::string &error) {
  if (!check(cudaMemcpyAsync(host.parameters, regions.parameters,
                             size_t(sizes.parameters), cudaMemcpyDeviceToHost,
                             compute),
             "downloading the parameters") ||
      !check(cudaMemcpyAsync(host.optimizerState, regions.optimizerState,
                             size_t(sizes.optimizerState),
                             cudaMemcpyDeviceToHost, compute),
             "downloading the optimizer state") ||
      !check(cudaMemcpyAsync(host.buffers, regions.buffers,
                             size_t(sizes.buffers), cudaMemcpyDeviceToHost,
                             compute),
             "downloading the buffers") ||
      !check(cudaStreamSynchronize(compute), "the last step"))
    return failWith(error, failure);
  return true;
}

/// Fetches the batch of `step` into its slot's pinned buffer and copies it
/// to the device on the copy stream.
bool CudaExecutor::stage(int64_t step, const FetchBatch &fetch,
                         std::string &error) {
  int slot = int(step % 2);
  if (!fetch(step, pinnedInputs[slot], error))
    return false;
  if (!check(cudaMemcpyAsync(inputSlots[slot], pinnedInputs[slot],
                             size_t(sizes.inputs), cudaMemcpyHostToDevice,
                             copy),
             "copying a batch") ||
      !check(cudaEventRecord(uploaded[slot], copy), "cudaEventRecord"))
    return failWith(error, failure);
  stagedStep[slot] = step;
  return true;
}

bool CudaExecutor::readResults(const StepInfo &step, StepMemory &host,
                               std::string &error) {
  for (int i = 0; i < step.numResults; ++i)
    if (!check(cudaMemcpyAsync(pinnedResults + i,
                               regions.arena + step.results[i].arenaOffset, 4,
                               cudaMemcpyDeviceToHost, compute),
               "reading a result"))
      return failWith(error, failure);
  if (!check(cudaMemcpyAsync(pinnedErrors, regions.control + 1, 16,
                             cudaMemcpyDeviceToHost, compute),
             "reading the error flag"))
    return failWith(error, failure);
  return true;
}

bool CudaExecutor::checkStep(std::string &error) {
  if (!failure.empty())
    return failWith(error, failure);
  if (pinnedErrors[0] != 0)
    return failWith(
        error,
        pinnedErrors[0] == 1 ? "a target (" + std::to_string(pinnedErrors[1]) +
                                   ") is out of range for the model's classes"
        : pinnedErrors[0] == 2
            ? "an index (" + std::to_string(pinnedErrors[1]) +
                  ") is out of range for its embedding table"
            : "row " + std::to_string(pinnedErrors[1]) +
                  " of a CSR weight has offsets or columns out of range");
  return true;
}

bool CudaExecutor::finishStep(const char *what, std::string &error) {
  cudaError_t status = cudaSuccess;
  if (!ranks) {
    status = cudaStreamSynchronize(compute);
  } else {
    // Polled: a sum that waits on a rank that stopped never completes, and
    // every rank waits here at the same point, so the ranks that never
    // arrive are named (runtime/Ranks.h).
#if MNEMO_HAVE_NCCL
    ncclResult_t broken = ncclSuccess;
#endif
    ranks->awaitDevice(
        [&] {
          status = cudaStreamQuery(compute);
#if MNEMO_HAVE_NCCL
          ncclResult_t state = ncclSuccess;
          if (status == cudaErrorNotReady &&
              ncclCommGetAsyncError(comm, &state) == ncclSuccess &&
              state != ncclSuccess && state != ncclInProgress) {
            broken = state;
            return true;
          }
#endif
          return status != cudaErrorNotReady;
        },
        "the step's gradient sums (NCCL)");
#if MNEMO_HAVE_NCCL
    if (broken != ncclSuccess) {
      ncclCheck(broken, "the step's gradient sums (NCCL)");
      // The communicator's kernels cannot finish: end them, so that the
      // process can exit.
      ncclCommAbort(comm);
      comm = nullptr;
      error = failure;
      return false;
    }
#endif
  }
  check(status, what);
  return checkStep(error);
}

bool CudaExecutor::joinRanks(Ranks &joined, std::string &error) {
#if !MNEMO_HAVE_NCCL
  (void)joined;
  error = "this trainer was built without NCCL, which sums a data-parallel "
          "step's gradients on GPUs (from the CUDA toolkit or PyTorch's "
          "nvidia-nccl package; set NCCL_ROOT and rebuild), or train with "
          "--device cpu";
  return false;
#else
  if (joined.localSize() > devices)
    return failWith(error,
                    std::to_string(joined.localSize()) + " ranks share this " +
                        "machine's " + std::to_string(devices) + " GPU" +
                        (devices == 1 ? "" : "s") +
                        ": NCCL needs a GPU for each rank (launch at most " +
                        std::to_string(devices) +
                        " per machine, or train with --device cpu)");
  // Rank 0's id reaches the others through MPI, with whether it has one
  // (so that a failure there does not leave the others waiting).
  struct {
    ncclUniqueId id;
    int32_t made;
  } message;
  std::memset(&message, 0, sizeof(message));
  if (joined.leader())
    message.made = ncclGetUniqueId(&message.id) == ncclSuccess;
  joined.broadcast(&message, int(sizeof(message)));
  if (!message.made)
    return failWith(error, "NCCL: rank 0 could not make the communicator's id "
                           "(ncclGetUniqueId; NCCL_DEBUG=WARN says why)");
  // Every rank reached the broadcast, so every rank is here: the
  // initialization (blocking) finds them all.
  if (!ncclCheck(
          ncclCommInitRank(&comm, joined.size(), message.id, joined.rank()),
          "ncclCommInitRank")) {
    comm = nullptr;
    error = failure;
    return false;
  }
  int buckets = model.trainStep.numGradientBuckets;
  bucketReady.assign(buckets, nullptr);
  bucketSummed.assign(buckets, nullptr);
  if (!check(cudaStreamCreateWithFlags(&collectives, cudaStreamNonBlocking),
             "cudaStreamCreate"))
    return failWith(error, failure);
  for (int k = 0; k < buckets; ++k)
    if (!check(
            cudaEventCreateWithFlags(&bucketReady[k], cudaEventDisableTiming),
            "cudaEventCreate") ||
        !check(
            cudaEventCreateWithFlags(&bucketSummed[k], cudaEventDisableTiming),
            "cudaEventCreate"))
      return failWith(error, failure);
  int version = 0;
  ncclGetVersion(&version);
  description += "; NCCL " + std::to_string(version / 10000) + "." +
                 std::to_string(version / 100 % 100) + "." +
                 std::to_string(version % 100) + ", " +
                 std::to_string(buckets) + " gradient bucket" +
                 (buckets == 1 ? "" : "s");
  ranks = &joined;
  shardRank = joined.rank();
  return true;
#endif
}

#if MNEMO_HAVE_NCCL
bool CudaExecutor::ncclCheck(ncclResult_t status, const char *what) {
  if (status == ncclSuccess)
    return true;
  if (failure.empty()) {
    failure = std::string(what) + ": " + ncclGetErrorString(status);
    const char *detail = comm ? ncclGetLastError(comm) : nullptr;
    if (detail && *detail)
      failure += std::string(" (") + detail + ")";
  }
  return false;
}
#endif

void CudaExecutor::gradientsReady(int bucket) {
#if MNEMO_HAVE_NCCL
  if (!comm || !failure.empty())
    return;
  // The bucket's gradients are final once what the step has enqueued so
  // far has run: the sum starts then, on its own stream, in place.
  // ncclAvg: the mean over the ranks, as each rank's loss is the mean over
  // its rows (so one process with the global batch computes the same).
  const GradientBucket &b = model.trainStep.gradientBuckets[bucket];
  if (!check(cudaEventRecord(bucketReady[bucket], compute),
             "cudaEventRecord") ||
      !check(cudaStreamWaitEvent(collectives, bucketReady[bucket], 0),
             "cudaStreamWaitEvent"))
    return;
  bool summed;
  if (int64_t shard = model.trainStep.shardBytes) {
    // ZeRO-1: each piece of the bucket (where it meets a rank's part)
    // goes to that rank alone, in place. NCCL's reduce-scatter needs
    // equal pieces; a bucket's are not.
    summed = ncclCheck(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; summed && r < ranks->size(); ++r) {
      int64_t lo = std::max(b.offset, r * shard);
      int64_t hi = std::min(b.offset + b.bytes, (r + 1) * shard);
      if (lo >= hi)
        continue;
      float *piece = reinterpret_cast<float *>(regions.gradients + lo);
      summed = ncclCheck(ncclReduce(piece, piece, size_t(hi - lo) / 4,
                                    ncclFloat32, ncclAvg, r, comm, collectives),
                         "ncclReduce");
    }
    summed = ncclCheck(ncclGroupEnd(), "ncclGroupEnd") && summed;
  } else {
    float *values = reinterpret_cast<float *>(regions.gradients + b.offset);
    summed = ncclCheck(ncclAllReduce(values, values, size_t(b.bytes / 4),
                                     ncclFloat32, ncclAvg, comm, collectives),
                       "ncclAllReduce");
  }
  if (summed)
    check(cudaEventRecord(bucketSummed[bucket], collectives),
          "cudaEventRecord");
#else
  (void)bucket; // joinRanks refused the plan
#endif
}

void CudaExecutor::awaitGradients(int bucket) {
  // What the step enqueues from here runs after the sum.
  if (ranks && failure.empty())
    check(cudaStreamWaitEvent(compute, bucketSummed[bucket], 0),
          "cudaStreamWaitEvent");
}

void CudaExecutor::sumOverRanks(uint8_t *value) {
#if MNEMO_HAVE_NCCL
  if (comm && failure.empty())
    ncclCheck(
        ncclAllReduce(value, value, 1, ncclFloat32, ncclSum, comm, compute),
        "ncclAllReduce");
#else
  (void)value;  // joinRanks refused the plan
#endif
}

void CudaExecutor::gatherParameters() {
#if MNEMO_HAVE_NCCL
  if (!comm || !failure.empty())
    return;
  // Each rank's updated parts go to its part of the gradient region, the
  // parts are gathered in place, and every parameter is copied back.
  const StepInfo &step = model.trainStep;
  int64_t shard = step.shardBytes;
  uint8_t *gradients = regions.gradients, *parameters = regions.parameters;
  for (int i = 0; i < step.numParameterPlaces; ++i) {
    const ParameterPlace &p = step.parameterPlaces[i];
    ShardPart part =
        shardPartOf(shardRank, shard, p.gradientOffset, p.bytes / 4);
    if (part.count > 0 &&
        !check(cudaMemcpyAsync(gradients + p.gradientOffset + 4 * part.first,
                               parameters + p.parameterOffset + 4 * part.first,
                               size_t(4 * part.count), cudaMemcpyDeviceToDevice,
                               compute),
               "cudaMemcpyAsync"))
      return;
  }
  if (!ncclCheck(ncclAllGather(gradients + shardRank * shard, gradients,
                               size_t(shard / 4), ncclFloat32, comm, compute),
                 "ncclAllGather"))
    return;
  for (int i = 0; i < step.numParameterPlaces; ++i) {
    const ParameterPlace &p = step.parameterPlaces[i];
    if (!check(cudaMemcpyAsync(parameters + p.parameterOffset,
                               gradients + p.gradientOffset, size_t(p.bytes),
                               cudaMemcpyDeviceToDevice, compute),
               "cudaMemcpyAsync"))
      return;
  }
#endif
}

bool CudaExecutor::train(int64_t step, int64_t lastStep,
                         const FetchBatch &fetch, StepMemory &host,
                         double *opSeconds, std::string &error) {
  int slot = int(step % 2);
  if (stagedStep[slot] != step && !stage(step, fetch, error))
    return false;
  useSlot(slot);
  lastSlot = slot;
  // The dropout step, from pinned memory that stays put until the copy ran.
  pinnedControl[slot * kControlSlots] = step;
  if (!check(cudaStreamWaitEvent(compute, uploaded[slot], 0),
             "cudaStreamWaitEvent") ||
      !check(cudaMemcpyAsync(regions.control,
                             pinnedControl + slot * kControlSlots, 8,
                             cudaMemcpyHostToDevice, compute),
             "setting the step"))
    return failWith(error, failure);
  profiling = opSeconds != nullptr;
  if (!graphs[slot] && !profiling && eagerSteps > 0 && !noGraphs)
    captureStep(slot);
  if (graphs[slot] && !profiling) {
    check(cudaGraphLaunch(graphs[slot], compute), "cudaGraphLaunch");
  } else {
    // The first step picks algorithms (and allocates nothing later);
    // profiled steps time each op; without a graph every step is eager.
    cudaModel.trainStep.run(*this);
    ++eagerSteps;
  }
  if (!readResults(model.trainStep, host, error))
    return false;
  // The next batch goes to the other buffer while this step computes.
  if (step < lastStep && !stage(step + 1, fetch, error))
    return false;
  if (!finishStep("the step", error))
    return false;
  for (int i = 0; i < model.trainStep.numResults; ++i)
    std::memcpy(host.arena + model.trainStep.results[i].arenaOffset,
                pinnedResults + i, 4);
  std::memcpy(host.inputs, pinnedInputs[slot], size_t(sizes.inputs));
  if (profiling) {
    for (int i = 0; i < cudaModel.trainStep.numOps; ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, opStart[i], opEnd[i]);
      opSeconds[i] += ms / 1000.0;
    }
    profiling = false;
  }
  return true;
}

bool CudaExecutor::eval(StepMemory &host, std::string &error) {
  if (!cudaModel.evalStep.run)
    return failWith(error, "the model has no eval step");
  // The eval batch goes to the last train step's buffer (that step has
  // run; the other buffer may hold the next step's batch, already taken
  // from the loader).
  int slot = lastSlot;
  useSlot(slot);
  if (!check(cudaStreamSynchronize(compute), "the last step") ||
      !check(cudaMemcpyAsync(inputSlots[slot], host.inputs,
                             size_t(sizes.inputs), cudaMemcpyHostToDevice,
                             compute),
             "copying a batch"))
    return failWith(error, failure);
  stagedStep[slot] = -1;
  cudaModel.evalStep.run(*this);
  if (!readResults(model.evalStep, host, error))
    return false;
  if (!check(cudaStreamSynchronize(compute), "the eval step"))
    return checkStep(error);
  if (!checkStep(error))
    return false;
  for (int i = 0; i < model.evalStep.numResults; ++i)
    std::memcpy(host.arena + model.evalStep.results[i].arenaOffset,
                pinnedResults + i, 4);
  return true;
}

/// Captures the train step into slot's graph. When capture or
/// instantiation fails (a library call that cannot be captured, such as a
/// cuDNN algorithm that synchronizes), the steps run eagerly from then on,
/// and the trainer says so once on stderr.
void CudaExecutor::captureStep(int slot) {
  cudaGraph_t graph = nullptr;
  std::string why;
  cudaError_t status =
      cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal);
  if (status == cudaSuccess) {
    cudaModel.trainStep.run(*this);
    cudaError_t ended = cudaStreamEndCapture(compute, &graph);
    if (!failure.empty())
      why = failure;
    else if (ended != cudaSuccess)
      why = cudaGetErrorString(ended);
    else if ((status = cudaGraphInstantiate(&graphs[slot], graph, 0)) !=
             cudaSuccess)
      why = std::string("instantiating: ") + cudaGetErrorString(status);
  } else {
    why = cudaGetErrorString(status);
  }
  if (graph)
    cudaGraphDestroy(graph);
  if (why.empty())
    return;
  // What the capture recorded never ran: the step runs again, eagerly.
  graphs[slot] = nullptr;
  failure.clear();
  cudaGetLastError(); // capture errors are not sticky; clear the last one
  noGraphs = true;
  std::fprintf(stderr,
               "gpu: capturing the step as a CUDA graph failed (%s); the "
               "steps run without a graph\n",
               why.c_str());
}

void CudaExecutor::launch(int kernel, uint32_t gridX, uint32_t gridY,
                          uint32_t blockSize, int64_t index,
                          std::initializer_list<int64_t> site) {
  if (!failure.empty())
    return;
  KernelRegions args(regions, index, site);
  void *params[] = {&args};
  CUresult r =
      driver.launchKernel(functions[kernel], gridX, gridY, 1, blockSize, 1, 1,
                          0, compute, params, nullptr);
  if (r != CUDA_SUCCESS)
    failure = std::string("launching ") + cudaModel.kernelNames[kernel] + ": " +
              driver.message(r);
}

/// cuBLASLt's plan for one GEMM (`epilogue`: with the fused epilogue, or
/// without), or false when its heuristic offers no algorithm.
bool CudaExecutor::planGemm(const GemmCall &call, GemmPlan &plan,
                            uint32_t alignment, bool epilogue,
                            bool pointerArrays) {
  // cuBLASLt's column-major form (CudaModel.h): B is its first operand.
  ColumnMajorGemm g = columnMajor(call);
  // int8: int8 operands, exact int32 accumulation and result, int32 alpha
  // and beta; cuBLASLt's IMMA kernels want this "TN" form (both operands
  // K-contiguous), which x @ W^T is. f32: TF32 tensor cores unless
  // --matmul-precision highest; bf16 and f16 run on the tensor cores with
  // f32 accumulation.
  bool int8 = call.dtype == DType::I8;
  cudaDataType_t type = int8 ? CUDA_R_8I : cudaType(call.dtype);
  cudaDataType_t resultType = int8             ? CUDA_R_32I
                              : call.outputF32 ? CUDA_R_32F
                                               : type;
  cublasComputeType_t compute = int8 ? CUBLAS_COMPUTE_32I
                                : call.dtype == DType::F32 && settings.tf32
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  cublasOperation_t opX = g.transX ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opY = g.transY ? CUBLAS_OP_T : CUBLAS_OP_N;
  bool ok =
      cublasLtMatmulDescCreate(&plan.desc, compute,
                               int8 ? CUDA_R_32I : CUDA_R_32F) ==
          CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                     &opX,
                                     sizeof(opX)) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                     &opY,
                                     sizeof(opY)) == CUBLAS_STATUS_SUCCESS;
  ok = ok &&
       cublasLtMatrixLayoutCreate(&plan.a, type, uint64_t(g.xRows),
                                  uint64_t(g.xCols),
                                  g.ldx) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutCreate(&plan.b, type, uint64_t(g.yRows),
                                  uint64_t(g.yCols),
                                  g.ldy) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutCreate(&plan.c, resultType, uint64_t(g.dRows),
                                  uint64_t(g.dCols),
                                  g.ldd) == CUBLAS_STATUS_SUCCESS;
  if (ok && pointerArrays) {
    // Every product's matrices from device arrays of pointers
    // (mnemoGemmPointers writes them before the call).
    int32_t count = int32_t(std::max<int64_t>(1, g.batch) * call.outer);
    uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
    for (cublasLtMatrixLayout_t layout : {plan.a, plan.b, plan.c})
      ok = ok &&
           cublasLtMatrixLayoutSetAttribute(
               layout, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode,
               sizeof(mode)) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatrixLayoutSetAttribute(
               layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
               sizeof(count)) == CUBLAS_STATUS_SUCCESS;
  } else if (ok && g.batch > 1) {
    int32_t count = int32_t(g.batch);
    int64_t strides[3] = {g.strideX, g.strideY, g.strideD};
    cublasLtMatrixLayout_t layouts[3] = {plan.a, plan.b, plan.c};
    for (int i = 0; i < 3 && ok; ++i)
      ok = cublasLtMatrixLayoutSetAttribute(
               layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
               sizeof(count)) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatrixLayoutSetAttribute(
               layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
               &strides[i], sizeof(strides[i])) == CUBLAS_STATUS_SUCCESS;
  }
  if (ok && epilogue && call.epilogue != Epilogue::None) {
    cublasLtEpilogue_t e =
        call.epilogue == Epilogue::Bias       ? CUBLASLT_EPILOGUE_BIAS
        : call.epilogue == Epilogue::ReluBias ? CUBLASLT_EPILOGUE_RELU_BIAS
                                              : CUBLASLT_EPILOGUE_GELU_BIAS;
    ok =
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                       &e, sizeof(e)) == CUBLAS_STATUS_SUCCESS;
  }
  // The heuristic may only pick kernels whose vector loads the operands'
  // real addresses allow (strided views start at any element).
  cublasLtMatmulPreference_t preference = nullptr;
  size_t limit = size_t((pointerArrays ? gemmWorkspace(call) : workspaceBytes) -
                        call.reservedWorkspace);
  cublasLtMatmulHeuristicResult_t heuristic;
  int found = 0;
  ok = ok &&
       cublasLtMatmulPreferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatmulPreferenceSetAttribute(
           preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit,
           sizeof(limit)) == CUBLAS_STATUS_SUCCESS;
  for (cublasLtMatmulPreferenceAttributes_t which :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    ok = ok && cublasLtMatmulPreferenceSetAttribute(
                   preference, which, &alignment, sizeof(alignment)) ==
                   CUBLAS_STATUS_SUCCESS;
  ok = ok &&
       cublasLtMatmulAlgoGetHeuristic(lt, plan.desc, plan.a, plan.b, plan.c,
                                      plan.c, preference, 1, &heuristic,
                                      &found) == CUBLAS_STATUS_SUCCESS &&
       found > 0;
  if (preference)
    cublasLtMatmulPreferenceDestroy(preference);
  if (!ok) {
    destroyGemmPlan(plan);
    return false;
  }
  plan.algo = heuristic.algo;
  plan.alignment = alignment;
  plan.ready = true;
  return true;
}

int64_t CudaExecutor::gemmWorkspace(const GemmCall &call) const {
  if (call.outer <= 1)
    return workspaceBytes;
  return workspaceBytes -
         gemmPointerTableBytes(std::max<int64_t>(1, call.batch) * call.outer);
}

void CudaExecutor::gemm(const GemmCall &call, const uint8_t *a,
                        const uint8_t *b, uint8_t *c, const uint8_t *bias) {
  if (!failure.empty())
    return;
  if (call.site >= int(gemms.size()))
    gemms.resize(call.site + 1);
  GemmPlan &plan = gemms[call.site];
  int64_t es = call.dtype == DType::F32 ? 4 : call.dtype == DType::I8 ? 1 : 2;
  int64_t ces = call.dtype == DType::I8 || call.outputF32 ? 4 : es;
  bool outer = call.outer > 1;
  uint32_t alignment =
      alignmentOf({uint64_t(a), uint64_t(b), uint64_t(c), uint64_t(bias),
                   uint64_t(call.batch > 1 ? call.strideA * es : 0),
                   uint64_t(call.batch > 1 ? call.strideB * es : 0),
                   uint64_t(call.batch > 1 ? call.strideC * ces : 0),
                   uint64_t(outer ? call.outerStrideA * es : 0),
                   uint64_t(outer ? call.outerStrideB * es : 0),
                   uint64_t(outer ? call.outerStrideC * ces : 0)});
  if (plan.ready && alignment < plan.alignment)
    destroyGemmPlan(plan);
  if (outer) {
    if (!plan.ready) {
      if (gemmWorkspace(call) < kMinGemmWorkspace) {
        failure = "internal error: the CUDA workspace has no room for GEMM "
                  "site " +
                  std::to_string(call.site) + "'s pointer tables";
        return;
      }
      plan.pointerArrays = planGemm(call, plan, alignment, false, true);
      if (!plan.pointerArrays) {
        std::fprintf(stderr,
                     "gpu: cuBLASLt has no pointer-array algorithm for GEMM "
                     "site %d; one strided-batched call per outer index\n",
                     call.site);
        if (!planGemm(call, plan, alignment, false, false)) {
          failure = "cuBLASLt has no algorithm for GEMM site " +
                    std::to_string(call.site);
          return;
        }
      }
    }
    if (plan.pointerArrays) {
      // The tables at the top of the workspace, written on the stream
      // (so a captured graph rewrites them on replay), then one call.
      int64_t inner = std::max<int64_t>(1, call.batch),
              count = inner * call.outer;
      uint8_t *table = regions.workspace + gemmWorkspace(call);
      int64_t strides[6] = {call.outerStrideA * es,  call.strideA * es,
                            call.outerStrideB * es,  call.strideB * es,
                            call.outerStrideC * ces, call.strideC * ces};
      int64_t outerCount = call.outer;
      void *args[] = {&a,          &b,          &c,          &outerCount,
                      &inner,      &strides[0], &strides[1], &strides[2],
                      &strides[3], &strides[4], &strides[5], &table};
      launchLibraryKernel(
          gemmPointersKernel,
          uint32_t(std::min<int64_t>((count + 255) / 256, 1 << 20)), 256, args,
          "mnemoGemmPointers");
      matmul(call, plan, nullptr, table, table + 8 * count, table + 16 * count);
      return;
    }
    GemmCall one = call;
    one.outer = 0;
    for (int64_t o = 0; o < call.outer && failure.empty(); ++o)
      matmul(one, plan, nullptr, a + o * call.outerStrideA * es,
             b + o * call.outerStrideB * es, c + o * call.outerStrideC * ces);
    return;
  }
  if (!plan.ready && !plan.int8Kernel) {
    if (!planGemm(call, plan, alignment, true, false)) {
      // No algorithm for this shape with the fused epilogue (an odd N, say)
      // or for int8: the plain GEMM and a kernel of ours after it, rather
      // than a failed run.
      if (call.epilogue != Epilogue::None &&
          planGemm(call, plan, alignment, false, false)) {
        plan.separateEpilogue = true;
      } else if (call.dtype == DType::I8) {
        plan.int8Kernel = true;
      } else {
        if (failure.empty())
          failure = "cuBLASLt has no algorithm for GEMM site " +
                    std::to_string(call.site) + " (" + std::to_string(call.m) +
                    "x" + std::to_string(call.n) + "x" +
                    std::to_string(call.k) + ")";
        return;
      }
      std::fprintf(stderr,
                   "gpu: cuBLASLt has no algorithm for GEMM site %d (%lldx%lld"
                   "x%lld%s); %s\n",
                   call.site, (long long)call.m, (long long)call.n,
                   (long long)call.k,
                   call.dtype == DType::I8 ? ", int8" : ", with its epilogue",
                   plan.int8Kernel ? "an int8 kernel of Mnemo's computes it"
                                   : "a separate epilogue kernel follows it");
    }
  }
  if (plan.int8Kernel) {
    // The emitter's int8 products are x @ W^T (row-major, W stored n x k).
    int64_t m = call.m, n = call.n, k = call.k, lda = call.lda, ldb = call.ldb,
            ldc = call.ldc;
    if (call.transA || !call.transB || call.batch > 1) {
      failure = "internal error: an int8 GEMM that is not x @ W^T";
      return;
    }
    void *args[] = {&m, &n, &k, &a, &lda, &b, &ldb, &c, &ldc};
    uint32_t blocks = uint32_t(std::min<int64_t>((m * n + 255) / 256, 1 << 20));
    launchLibraryKernel(gemmInt8Kernel, blocks, 256, args, "mnemoGemmInt8");
    return;
  }
  bool fused = bias && !plan.separateEpilogue;
  if (!matmul(call, plan, fused ? bias : nullptr, a, b, c))
    return;
  if (plan.separateEpilogue) {
    // The epilogues are f32 (CudaEmitter's epilogueRoot): c[m, n] += bias,
    // then the activation.
    int64_t rows = call.m, cols = call.n, ld = call.ldc;
    int kind = int(call.epilogue);
    void *args[] = {&c, &bias, &rows, &cols, &ld, &kind};
    uint32_t blocks =
        uint32_t(std::min<int64_t>((rows * cols + 255) / 256, 1 << 20));
    launchLibraryKernel(biasEpilogueKernel, blocks, 256, args,
                        "mnemoBiasEpilogue");
  }
}

bool CudaExecutor::matmul(const GemmCall &call, GemmPlan &plan,
                          const uint8_t *bias, const void *a, const void *b,
                          void *c) {
  if (bias && cublasLtMatmulDescSetAttribute(
                  plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                  sizeof(bias)) != CUBLAS_STATUS_SUCCESS) {
    failure = "cuBLASLt: cannot set the bias";
    return false;
  }
  const float one = 1.0f, zeroValue = 0.0f;
  const int32_t oneInt = 1, zeroInt = 0;
  bool int8 = call.dtype == DType::I8;
  // cuBLASLt's column-major form: B is its first operand.
  cublasStatus_t s = cublasLtMatmul(
      lt, plan.desc, int8 ? static_cast<const void *>(&oneInt) : &one, b,
      plan.a, a, plan.b,
      int8              ? static_cast<const void *>(&zeroInt)
      : call.accumulate ? &one
                        : &zeroValue,
      c, plan.c, c, plan.c, &plan.algo,
      regions.workspace + call.reservedWorkspace,
      size_t((plan.pointerArrays ? gemmWorkspace(call) : workspaceBytes) -
             call.reservedWorkspace),
      compute);
  if (s != CUBLAS_STATUS_SUCCESS) {
    failure = "cuBLASLt matmul failed at GEMM site " +
              std::to_string(call.site) + " (status " + std::to_string(int(s)) +
              ")";
    return false;
  }
  return true;
}

void CudaExecutor::launchLibraryKernel(CUfunction function, uint32_t blocks,
                                       uint32_t threads, void **args,
                                       const char *name) {
  CUresult r = driver.launchKernel(function, blocks, 1, 1, threads, 1, 1, 0,
                                   compute, args, nullptr);
  if (r != CUDA_SUCCESS && failure.empty())
    failure = std::string("launching ") + name + ": " + driver.message(r);
}

bool CudaExecutor::haveCudnn(std::string &why) {
  if (dnn)
    return true;
  cudnnStatus_t made = cudnnCreate(&dnn);
  if (made != CUDNN_STATUS_SUCCESS ||
      cudnnSetStream(dnn, compute) != CUDNN_STATUS_SUCCESS) {
    why = std::string("cannot create a cuDNN handle (") +
          cudnnGetErrorString(made) + ", cuDNN " +
          std::to_string(cudnnGetVersion()) + ")";
    if (made == CUDNN_STATUS_SUCCESS)
      cudnnDestroy(dnn);
    dnn = nullptr;
    return false;
  }
  return true;
}

bool CudaExecutor::planConv(const ConvCall &call, ConvPlan &plan) {
  std::string why;
  if (!haveCudnn(why)) {
    if (failure.empty())
      failure = why + " for the first convolution";
    return false;
  }
  cudnnDataType_t type = cudnnType(call.dtype);
  bool ok =
      cudnnCreateTensorDescriptor(&plan.x) == CUDNN_STATUS_SUCCESS &&
      cudnnCreateTensorDescriptor(&plan.y) == CUDNN_STATUS_SUCCESS &&
      cudnnCreateFilterDescriptor(&plan.w) == CUDNN_STATUS_SUCCESS &&
      cudnnCreateConvolutionDescriptor(&plan.conv) == CUDNN_STATUS_SUCCESS &&
      cudnnSetTensor4dDescriptor(plan.x, CUDNN_TENSOR_NCHW, type, int(call.n),
                                 int(call.c), int(call.h),
                                 int(call.w)) == CUDNN_STATUS_SUCCESS &&
      cudnnSetTensor4dDescriptor(plan.y, CUDNN_TENSOR_NCHW, type, int(call.n),
                                 int(call.o), int(call.ho),
                                 int(call.wo)) == CUDNN_STATUS_SUCCESS &&
      cudnnSetFilter4dDescriptor(plan.w, type, CUDNN_TENSOR_NCHW, int(call.o),
                                 int(call.c), int(call.kh),
                                 int(call.kw)) == CUDNN_STATUS_SUCCESS &&
      cudnnSetConvolution2dDescriptor(
          plan.conv, int(call.padH), int(call.padW), int(call.strideH),
          int(call.strideW), 1, 1, CUDNN_CROSS_CORRELATION,
          CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS &&
      // f32 convolutions in TF32 on the tensor cores by default (PyTorch's
      // torch.backends.cudnn.allow_tf32), in f32 with --matmul-precision
      // highest; half precision uses the tensor cores.
      cudnnSetConvolutionMathType(
          plan.conv, call.dtype != DType::F32 ? CUDNN_TENSOR_OP_MATH
                     : settings.tf32          ? CUDNN_DEFAULT_MATH
                                     : CUDNN_FMA_MATH) == CUDNN_STATUS_SUCCESS;
  // The best algorithm whose workspace fits the planned one.
  constexpr int kCandidates = 8;
  int returned = 0;
  plan.algo = -1;
  if (ok && call.kind == ConvKind::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kCandidates];
    ok = cudnnGetConvolutionForwardAlgorithm_v7(dnn, plan.x, plan.w, plan.conv,
                                                plan.y, kCandidates, &returned,
                                                perf) == CUDNN_STATUS_SUCCESS;
    for (int i = 0; ok && i < returned && plan.algo < 0; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS &&
          int64_t(perf[i].memory) <= workspaceBytes)
        plan.algo = int(perf[i].algo);
  } else if (ok && call.kind == ConvKind::InputGrad) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kCandidates];
    ok = cudnnGetConvolutionBackwardDataAlgorithm_v7(
             dnn, plan.w, plan.y, plan.conv, plan.x, kCandidates, &returned,
             perf) == CUDNN_STATUS_SUCCESS;
    for (int i = 0; ok && i < returned && plan.algo < 0; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS &&
          int64_t(perf[i].memory) <= workspaceBytes)
        plan.algo = int(perf[i].algo);
  } else if (ok) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kCandidates];
    ok = cudnnGetConvolutionBackwardFilterAlgorithm_v7(
             dnn, plan.x, plan.y, plan.conv, plan.w, kCandidates, &returned,
             perf) == CUDNN_STATUS_SUCCESS;
    for (int i = 0; ok && i < returned && plan.algo < 0; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS &&
          int64_t(perf[i].memory) <= workspaceBytes)
        plan.algo = int(perf[i].algo);
  }
  if (!ok || plan.algo < 0) {
    if (failure.empty())
      failure = "cuDNN has no algorithm for convolution site " +
                std::to_string(call.site) + " within the " +
                mib(workspaceBytes) + " workspace";
    return false;
  }
  plan.ready = true;
  return true;
}

void CudaExecutor::conv(const ConvCall &call, const uint8_t *first,
                        const uint8_t *second, uint8_t *result) {
  if (!failure.empty())
    return;
  if (call.site >= int(convs.size()))
    convs.resize(call.site + 1);
  ConvPlan &plan = convs[call.site];
  if (!plan.ready && !planConv(call, plan))
    return;
  const float one = 1.0f, zeroValue = 0.0f;
  size_t ws = size_t(workspaceBytes);
  cudnnStatus_t s;
  if (call.kind == ConvKind::Forward)
    s = cudnnConvolutionForward(dnn, &one, plan.x, first, plan.w, second,
                                plan.conv, cudnnConvolutionFwdAlgo_t(plan.algo),
                                regions.workspace, ws, &zeroValue, plan.y,
                                result);
  else if (call.kind == ConvKind::InputGrad)
    s = cudnnConvolutionBackwardData(
        dnn, &one, plan.w, second, plan.y, first, plan.conv,
        cudnnConvolutionBwdDataAlgo_t(plan.algo), regions.workspace, ws,
        &zeroValue, plan.x, result);
  else
    s = cudnnConvolutionBackwardFilter(
        dnn, &one, plan.x, second, plan.y, first, plan.conv,
        cudnnConvolutionBwdFilterAlgo_t(plan.algo), regions.workspace, ws,
        &zeroValue, plan.w, result);
  if (s != CUDNN_STATUS_SUCCESS)
    failure = std::string("cuDNN convolution failed at site ") +
              std::to_string(call.site) + ": " + cudnnGetErrorString(s);
}

AttentionPlans &CudaExecutor::planAttention(const AttentionCall &call) {
  char key[256];
  std::snprintf(
      key, sizeof(key), "%d %lld %lld %lld %lld %lld %lld %lld %d %a %a %lld",
      int(call.dtype), (long long)call.batch, (long long)call.heads,
      (long long)call.kvHeads, (long long)call.queries, (long long)call.keys,
      (long long)call.headDim, (long long)call.valueDim, int(call.causal),
      double(call.scale), call.dropoutP, (long long)call.seed);
  auto [it, inserted] = attentions.try_emplace(key);
  AttentionPlans &plans = it->second;
  if (!inserted)
    return plans;
  char problem[160];
  std::snprintf(
      problem, sizeof(problem),
      "%lld x %lld heads (%lld kv) %lld x %lld, d %lld%s%s, %s",
      (long long)call.batch, (long long)call.heads, (long long)call.kvHeads,
      (long long)call.queries, (long long)call.keys, (long long)call.headDim,
      call.causal ? ", causal" : "", call.dropoutP > 0 ? ", dropout" : "",
      call.dtype == DType::BF16 ? "bf16" : "f16");
  attention::CudnnAttentionShape shape{
      call.batch, call.heads,    call.kvHeads,         call.queries,
      call.keys,  call.headDim,  call.valueDim,        call.causal,
      call.scale, call.dropoutP, cudnnType(call.dtype)};
  std::string why;
  const char *disabled = std::getenv("MNEMO_CUDNN_ATTENTION");
  if (disabled && std::string(disabled) == "0")
    why = "MNEMO_CUDNN_ATTENTION=0";
  else if (haveCudnn(why)) {
    plans.forward = attention::CudnnAttentionPlan::forward(dnn, shape, why);
    if (plans.forward)
      plans.backward = attention::CudnnAttentionPlan::backward(dnn, shape, why);
    plans.scratch = attention::CudnnAttentionPlan::scratchBytes(shape);
    int64_t need =
        plans.forward && plans.backward
            ? plans.scratch + std::max(plans.forward->workspaceBytes(),
                                       plans.backward->workspaceBytes())
            : 0;
    if (need > workspaceBytes)
      why = "cuDNN's plans need " + mib(need) + " of workspace, the step " +
            "planned " + mib(workspaceBytes);
    // Philox offsets 2^32 apart per site: a step draws fewer numbers.
    int64_t offset = (call.seed & 0x7fffffff) << 32;
    if (need <= workspaceBytes && plans.backward &&
        (!check(cudaMalloc(&plans.offset, sizeof(int64_t)), "cudaMalloc") ||
         !check(cudaMemcpy(plans.offset, &offset, sizeof(int64_t),
                           cudaMemcpyHostToDevice),
                "cudaMemcpy")))
      return plans;
  }
  if (!plans.offset) {
    plans.forward.reset();
    plans.backward.reset();
    std::fprintf(stderr, "gpu: attention %s: Mnemo's kernels (%s)\n", problem,
                 why.c_str());
  } else {
    std::fprintf(stderr,
                 "gpu: attention %s: cuDNN (forward: %s; backward: %s)\n",
                 problem, plans.forward->description().c_str(),
                 plans.backward->description().c_str());
  }
  return plans;
}

bool CudaExecutor::attention(const AttentionCall &call,
                             const AttentionTensors &t) {
  if (!failure.empty())
    return true; // the step is abandoned; nothing else is enqueued
  AttentionPlans &plans = planAttention(call);
  if (!plans.offset)
    return !failure.empty();
  // Philox's seed is the step (read on the device when the step runs, so a
  // captured graph draws a new mask each step).
  const int64_t *seed = regions.control + kDropoutStepSlot;
  float *rowDot = reinterpret_cast<float *>(regions.workspace);
  float *accumulator = reinterpret_cast<float *>(
      regions.workspace + attention::CudnnAttentionPlan::rowDotBytes(
                              call.batch * call.heads * call.queries));
  void *cudnnWorkspace = regions.workspace + plans.scratch;
  cudnnStatus_t s;
  if (call.kind == AttentionKind::Forward) {
    attention::CudnnAttentionForwardArgs args{
        t.query,
        t.key,
        t.value,
        t.output,
        reinterpret_cast<float *>(t.logSumExp),
        seed,
        plans.offset};
    s = plans.forward->run(dnn, compute, args, cudnnWorkspace);
  } else {
    attention::CudnnAttentionBackwardArgs args{
        t.query,
        t.key,
        t.value,
        t.output,
        reinterpret_cast<const float *>(t.logSumExp),
        t.gradOutput,
        t.gradQuery,
        t.gradKey,
        t.gradValue,
        seed,
        plans.offset,
        rowDot,
        accumulator};
    s = plans.backward->run(dnn, compute, args, cudnnWorkspace);
  }
  if (s != CUDNN_STATUS_SUCCESS && failure.empty())
    failure = std::string("cuDNN attention failed at site ") +
              std::to_string(call.site) + ": " + cudnnGetErrorString(s);
  return true;
}

void CudaExecutor::zero(uint8_t *p, int64_t bytes) {
  if (failure.empty())
    check(cudaMemsetAsync(p, 0, size_t(bytes), compute), "cudaMemsetAsync");
}

void CudaExecutor::beginOp(int op) {
  if (profiling && failure.empty())
    check(cudaEventRecord(opStart[op], compute), "cudaEventRecord");
}

void CudaExecutor::endOp(int op) {
  if (profiling && failure.empty())
    check(cudaEventRecord(opEnd[op], compute), "cudaEventRecord");
}

} // namespace

bool mnemo::runtime::cudaBuiltIn() { return true; }

bool mnemo::runtime::cudaDeviceAvailable(std::string &why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorInsufficientDriver)
    return failWith(why, "no CUDA driver (or one older than CUDA " +
                             std::to_string(CUDART_VERSION / 1000) + ")");
  if (status != cudaSuccess)
    return failWith(why, std::string("no usable CUDA device (") +
                             cudaGetErrorString(status) + ")");
  if (count == 0)
    return failWith(why, "no CUDA device");
  return true;
}

std::unique_ptr<DeviceExecutor> mnemo::runtime::makeCudaExecutor(
    const ModelInfo &model, const CudaSettings &settings, std::string &error) {
  const CudaModelInfo *cudaModel = mnemoCudaModel();
  if (!cudaModel || (!cudaModel->trainStep.run && !cudaModel->evalStep.run)) {
    error = "this program has no CUDA steps";
    return nullptr;
  }
  if (cudaModel->unsupported) {
    error = cudaModel->unsupported;
    return nullptr;
  }
  auto executor = std::make_unique<CudaExecutor>(model, *cudaModel, settings);
  if (!executor->start(error))
    return nullptr;
  return executor;
}
