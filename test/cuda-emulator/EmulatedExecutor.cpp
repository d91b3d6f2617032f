//===- EmulatedExecutor.cpp - The CUDA steps, run on the CPU --------------===//
//
// The device executor of an emulated trainer (test/cuda-emulator/
// build-trainer.sh): the model's generated CUDA host code and kernels,
// compiled as host C++, run against host memory laid out exactly as the
// CUDA executor lays out its one device allocation. Kernel launches go to
// the fiber scheduler; GEMMs are computed from their column-major form
// (CudaModel.h's columnMajor, which the CUDA executor hands to cuBLASLt),
// with the epilogues; convolutions use the CPU kernels (cuDNN computes the
// same cross-correlation).
//
// What it checks: the generated kernels' arithmetic, indexing, launch
// configurations, tables and workspace use, and the GEMM calls' mapping.
// What it cannot: timing, streams, graphs, NVRTC's code.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/convolution/ConvolutionKernels.h"
#include "runtime/Executor.h"
#include "runtime/Ranks.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CudaModel.h"
#include "runtime/cuda/DeviceLayout.h"
#include "test/cuda-emulator/Emulator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <vector>

using namespace mnemo;
using namespace mnemo::runtime;
using namespace mnemo::cuda;

namespace {

using Kernel = void (*)(KernelRegions);

struct Launch {
  Kernel kernel;
  KernelRegions regions;
};
void trampoline(const void *argument) {
  const Launch *l = static_cast<const Launch *>(argument);
  l->kernel(l->regions);
}

/// Kernels.cuh's mnemoGemmPointers, compiled into the model's kernels.
using PointersKernel = void (*)(const uint8_t *, const uint8_t *, uint8_t *,
                                int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, uint8_t **);
PointersKernel pointersKernel = nullptr;
struct PointerTables {
  const uint8_t *a, *b;
  uint8_t *c;
  int64_t outer, inner, strides[6];
  uint8_t **table;
};
void pointerTrampoline(const void *argument) {
  const PointerTables *t = static_cast<const PointerTables *>(argument);
  pointersKernel(t->a, t->b, t->c, t->outer, t->inner, t->strides[0],
                 t->strides[1], t->strides[2], t->strides[3], t->strides[4],
                 t->strides[5], t->table);
}

class EmulatedExecutor final : public DeviceExecutor, public StepLauncher {
public:
  EmulatedExecutor(const ModelInfo &model, const CudaModelInfo &cudaModel)
      : model(model), cudaModel(cudaModel) {}
  ~EmulatedExecutor() override { std::free(block); }

  bool start(std::string &error) {
    sizes = regionsOf(model);
    for (int k = 0; k < cudaModel.numKernels; ++k) {
      void *symbol = dlsym(RTLD_DEFAULT, cudaModel.kernelNames[k]);
      if (!symbol) {
        error = std::string("kernel ") + cudaModel.kernelNames[k] +
                " is not in the program (link with -rdynamic)";
        return false;
      }
      kernels.push_back(reinterpret_cast<Kernel>(symbol));
    }
    pointersKernel = reinterpret_cast<PointersKernel>(
        dlsym(RTLD_DEFAULT, "mnemoGemmPointers"));
    if (!pointersKernel) {
      error = "kernel mnemoGemmPointers is not in the program";
      return false;
    }
    DeviceLayout layout(sizes, cudaModel.workspaceBytes);
    allocation = layout.total();
    block = static_cast<uint8_t *>(
        std::aligned_alloc(kDeviceAlignment, size_t(allocation)));
    // Not zeroed: stale bytes in the arena or workspace must not matter.
    std::memset(block, 0xA5, size_t(allocation));
    layout.place(block, regions, slots);
    std::memset(regions.control, 0, size_t(layout.control));
    return true;
  }

  std::string describe() const override {
    return "CUDA emulated on the CPU (test/cuda-emulator)";
  }
  int64_t allocatedBytes() const override { return allocation; }
  std::string allocationSummary() const override {
    return std::to_string(allocation) + " bytes in one allocation";
  }
  int64_t measuredDeviceBytes() override { return allocation; }
  bool upload(const StepMemory &host, std::string &) override {
    std::memcpy(regions.parameters, host.parameters, sizes.parameters);
    std::memcpy(regions.optimizerState, host.optimizerState,
                sizes.optimizerState);
    std::memcpy(regions.buffers, host.buffers, sizes.buffers);
    return true;
  }
  bool download(StepMemory &host, std::string &) override {
    std::memcpy(host.parameters, regions.parameters, sizes.parameters);
    std::memcpy(host.optimizerState, regions.optimizerState,
                sizes.optimizerState);
    std::memcpy(host.buffers, regions.buffers, sizes.buffers);
    return true;
  }
  bool train(int64_t step, int64_t, const FetchBatch &fetch, StepMemory &host,
             double *, std::string &error) override {
    int slot = int(step % 2);
    regions.inputs = slots[slot];
    if (!fetch(step, regions.inputs, error))
      return false;
    regions.control[0] = step;
    cudaModel.trainStep.run(*this);
    std::memcpy(host.inputs, regions.inputs, sizes.inputs);
    return finish(model.trainStep, host, error);
  }
  bool eval(StepMemory &host, std::string &error) override {
    std::memcpy(regions.inputs, host.inputs, sizes.inputs);
    cudaModel.evalStep.run(*this);
    return finish(model.evalStep, host, error);
  }
  int numTrainOps() const override { return cudaModel.trainStep.numOps; }
  const char *const *trainOpNames() const override {
    return cudaModel.trainStep.opNames;
  }
  // Data parallelism: the emulated device's gradient region is host
  // memory, so the host's exchange (MPI) sums it, where a GPU would use
  // NCCL on the step's stream. Under ZeRO-1 it reduce-scatters the
  // buckets and gathers the parameters as the CPU step's exchange does.
  bool joinRanks(Ranks &ranks, std::string &) override {
    exchangeMemory.gradients = regions.gradients;
    exchangeMemory.parameters = regions.parameters;
    exchangeMemory.shardRank = shardRank = ranks.rank();
    exchangeMemory.shardBytes = model.trainStep.shardBytes;
    exchange = ranks.gradientExchange(model.trainStep, exchangeMemory);
    return true;
  }
  void sumOverRanks(uint8_t *value) override {
    if (!exchange) // one rank: its sum is the sum
      return;
    // The launches before it ran (the emulator runs each as it comes).
    float f;
    std::memcpy(&f, value, 4);
    double sum = f;
    exchange->sumOverRanks(&sum, 1);
    f = float(sum);
    std::memcpy(value, &f, 4);
  }
  void gatherParameters() override {
    if (exchange)
      exchange->gatherParameters();
  }
  void gradientsReady(int bucket) override {
    if (exchange)
      exchange->gradientsReady(bucket);
  }
  void awaitGradients(int bucket) override {
    if (exchange)
      exchange->awaitGradients(bucket);
  }

  void launch(int kernel, uint32_t gridX, uint32_t gridY, uint32_t threads,
              int64_t index, std::initializer_list<int64_t> site) override {
    Launch l{kernels[kernel], KernelRegions(regions, index, site)};
    emulator::launch(trampoline, &l, gridX, gridY, threads);
  }

  void gemm(const GemmCall &call, const uint8_t *a, const uint8_t *b,
            uint8_t *c, const uint8_t *bias) override {
    if (call.outer > 1) {
      // The outer batch, as the GPU runs it: mnemoGemmPointers (the kernel
      // library's, emulated) writes the pointer tables at the top of the
      // workspace, and each product reads its matrices from them, as
      // cuBLASLt's pointer-array mode does.
      int64_t es = call.dtype == DType::F32 ? 4 : 2;
      int64_t inner = std::max<int64_t>(1, call.batch);
      int64_t count = inner * call.outer;
      uint8_t *table = regions.workspace + cudaModel.workspaceBytes -
                       gemmPointerTableBytes(count);
      PointerTables t{a,
                      b,
                      c,
                      call.outer,
                      inner,
                      {call.outerStrideA * es, call.strideA * es,
                       call.outerStrideB * es, call.strideB * es,
                       call.outerStrideC * es, call.strideC * es},
                      reinterpret_cast<uint8_t **>(table)};
      emulator::launch(
          pointerTrampoline, &t,
          unsigned(std::min<int64_t>((count + 255) / 256, 1 << 20)), 1, 256);
      GemmCall one = call;
      one.outer = 0;
      one.batch = 1;
      uint8_t **pointers = t.table;
      for (int64_t i = 0; i < count; ++i)
        gemm(one, pointers[i], pointers[count + i], pointers[2 * count + i],
             bias);
      return;
    }
    switch (call.dtype) {
    case DType::F32:
      return gemmAs<float>(call, a, b, c, bias);
    case DType::BF16:
      return gemmAs<cpu::bf16_t>(call, a, b, c, bias);
    case DType::F16:
      return gemmAs<cpu::f16_t>(call, a, b, c, bias);
    case DType::I8:
      return gemmInt8(call, a, b, c);
    }
  }

  /// int8 operands, exact int32 products (CUBLAS_COMPUTE_32I).
  void gemmInt8(const GemmCall &call, const uint8_t *a, const uint8_t *b,
                uint8_t *c) {
    ColumnMajorGemm g = columnMajor(call);
    const int8_t *x = reinterpret_cast<const int8_t *>(b);
    const int8_t *y = reinterpret_cast<const int8_t *>(a);
    int32_t *d = reinterpret_cast<int32_t *>(c);
    int64_t inner = g.transX ? g.xRows : g.xCols;
    for (int64_t col = 0; col < g.dCols; ++col)
      for (int64_t row = 0; row < g.dRows; ++row) {
        int32_t sum = 0;
        for (int64_t k = 0; k < inner; ++k)
          sum += int32_t(g.transX ? x[k + row * g.ldx] : x[row + k * g.ldx]) *
                 int32_t(g.transY ? y[col + k * g.ldy] : y[k + col * g.ldy]);
        d[row + col * g.ldd] = sum;
      }
  }

  /// D = op(X) op(Y), column-major, as cuBLASLt is asked to compute it:
  /// f32 accumulation, the epilogue, then the result in T.
  template <typename T>
  void gemmAs(const GemmCall &call, const uint8_t *a, const uint8_t *b,
              uint8_t *c, const uint8_t *bias) {
    if (call.outputF32)
      return gemmInto<T, float>(call, a, b, c, bias);
    return gemmInto<T, T>(call, a, b, c, bias);
  }
  template <typename T, typename Out>
  void gemmInto(const GemmCall &call, const uint8_t *a, const uint8_t *b,
                uint8_t *c, const uint8_t *bias) {
    ColumnMajorGemm g = columnMajor(call);
    const T *x0 = reinterpret_cast<const T *>(b);
    const T *y0 = reinterpret_cast<const T *>(a);
    Out *d0 = reinterpret_cast<Out *>(c);
    const T *biasRow = reinterpret_cast<const T *>(bias);
    int64_t inner = g.transX ? g.xRows : g.xCols;
    for (int64_t batch = 0; batch < std::max<int64_t>(1, g.batch); ++batch) {
      const T *x = x0 + batch * g.strideX, *y = y0 + batch * g.strideY;
      Out *d = d0 + batch * g.strideD;
      for (int64_t col = 0; col < g.dCols; ++col)
        for (int64_t row = 0; row < g.dRows; ++row) {
          double sum = 0;
          for (int64_t k = 0; k < inner; ++k) {
            float xv =
                float(g.transX ? x[k + row * g.ldx] : x[row + k * g.ldx]);
            float yv =
                float(g.transY ? y[col + k * g.ldy] : y[k + col * g.ldy]);
            sum += double(xv) * double(yv);
          }
          float v = float(sum);
          if (call.epilogue != Epilogue::None)
            v += float(biasRow[row]);
          if (call.epilogue == Epilogue::ReluBias)
            v = v > 0.0f ? v : 0.0f;
          // cuBLASLt's beta 1: C read in f32 and added before the rounding.
          if (call.accumulate)
            v += float(d[row + col * g.ldd]);
          d[row + col * g.ldd] = Out(v);
        }
    }
  }

  void conv(const ConvCall &call, const uint8_t *first, const uint8_t *second,
            uint8_t *result) override {
    cpu::ConvShape s = {
        call.n,       call.c,    call.h,    call.w,  call.o,
        call.kh,      call.kw,   call.ho,   call.wo, call.strideH,
        call.strideW, call.padH, call.padW, 1};
    // The CPU kernels' workspace for one image: its columns and its
    // output rows; for 16-bit storage (cuDNN's bf16 and f16 convolutions,
    // which accumulate in f32), then the operands and the result widened.
    int64_t columns = (call.c * call.kh * call.kw + call.o) * call.ho * call.wo;
    int64_t widened = call.n * call.c * call.h * call.w +
                      call.o * call.c * call.kh * call.kw +
                      call.n * call.o * call.ho * call.wo;
    std::vector<float> scratch(
        size_t(columns + (call.dtype == DType::F32 ? 0 : widened)));
    int kind = call.kind == ConvKind::Forward     ? 0
               : call.kind == ConvKind::InputGrad ? 1
                                                  : 2;
    if (call.dtype == DType::BF16)
      return cpu::conv2dHalf(
          kind, s, half<cpu::bf16_t>(first), half<cpu::bf16_t>(second),
          reinterpret_cast<cpu::bf16_t *>(result), scratch.data());
    if (call.dtype == DType::F16)
      return cpu::conv2dHalf(
          kind, s, half<cpu::f16_t>(first), half<cpu::f16_t>(second),
          reinterpret_cast<cpu::f16_t *>(result), scratch.data());
    auto f = [](const uint8_t *p) {
      return reinterpret_cast<const float *>(p);
    };
    float *out = reinterpret_cast<float *>(result);
    if (call.kind == ConvKind::Forward)
      cpu::conv2d(s, f(first), f(second), out, scratch.data());
    else if (call.kind == ConvKind::InputGrad)
      cpu::conv2dInputGrad(s, f(first), f(second), out, scratch.data());
    else
      cpu::conv2dWeightGrad(s, f(first), f(second), out, scratch.data());
  }

  template <typename T> static const T *half(const uint8_t *p) {
    return reinterpret_cast<const T *>(p);
  }

  /// cuDNN is not emulated: every attention runs Mnemo's kernels, which
  /// is what the emulator checks.
  bool attention(const AttentionCall &, const AttentionTensors &) override {
    return false;
  }
  void zero(uint8_t *p, int64_t bytes) override { std::memset(p, 0, bytes); }
  void beginOp(int) override {}
  void endOp(int) override {}

private:
  bool finish(const StepInfo &step, StepMemory &host, std::string &error) {
    if (!failure.empty()) {
      error = failure;
      return false;
    }
    if (regions.control[1] != 0) {
      error = "the kernels raised error " + std::to_string(regions.control[1]) +
              " (value " + std::to_string(regions.control[2]) + ")";
      return false;
    }
    for (int i = 0; i < step.numResults; ++i)
      std::memcpy(host.arena + step.results[i].arenaOffset,
                  regions.arena + step.results[i].arenaOffset, 4);
    return true;
  }

  const ModelInfo &model;
  const CudaModelInfo &cudaModel;
  // The data-parallel exchange over the emulated gradient region (it keeps
  // a reference to exchangeMemory).
  StepMemory exchangeMemory{};
  std::unique_ptr<GradientExchange> exchange;
  PlanRegions sizes;
  std::vector<Kernel> kernels;
  uint8_t *block = nullptr;
  uint8_t *slots[2] = {nullptr, nullptr};
  int64_t allocation = 0;
  std::string failure;
};

} // namespace

bool mnemo::runtime::cudaBuiltIn() { return true; }

bool mnemo::runtime::cudaDeviceAvailable(std::string &) { return true; }

std::unique_ptr<DeviceExecutor>
mnemo::runtime::makeCudaExecutor(const ModelInfo &model, const CudaSettings &,
                                 std::string &error) {
  // The emulator's GEMMs and convolutions are f32 whatever the precision
  // setting: it checks indexing and arithmetic, not TF32's rounding.
  if (const char *why = mnemoCudaModel()->unsupported) {
    error = why;
    return nullptr;
  }
  auto executor = std::make_unique<EmulatedExecutor>(model, *mnemoCudaModel());
  if (!executor->start(error))
    return nullptr;
  return executor;
}
