//===- CudaModel.h - What a model's CUDA code tells the runtime -*- C++ -*-===//
//
// mnemoc emits, next to the CPU step functions, a CUDA version of each step
// from the same planned IR: the kernels' source (compiled by NVRTC when the
// trainer starts) and host functions that enqueue the step's work through
// a StepLauncher: kernel launches by index, cuBLASLt GEMMs, cuDNN
// convolutions and attention, and memsets, all at the plan's offsets. The
// runtime implements the launcher (runtime/cuda/CudaExecutor.cu); the generated
// code needs no CUDA header and compiles with any C++ compiler.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_CUDA_CUDAMODEL_H
#define MNEMO_RUNTIME_CUDA_CUDAMODEL_H

#include <cstdint>
#include <initializer_list>

namespace mnemo::cuda {

/// I8: int8 operands and an int32 result, accumulated exactly
/// (CUBLAS_COMPUTE_32I), for inference's matmul_int8.
enum class DType : int { F32 = 0, BF16 = 1, F16 = 2, I8 = 3 };

/// What cuBLASLt applies after the product (fused by the emitter when a
/// GEMM's only consumer adds a bias row, with or without an activation).
enum class Epilogue : int { None = 0, Bias = 1, ReluBias = 2, GeluBias = 3 };

/// A row-major GEMM, C = op(A) op(B), repeated over a strided batch, and
/// that batch repeated `outer` times at the outer strides (two batch
/// dimensions that do not flatten into one, such as attention's [batch,
/// heads] over a [batch, tokens, heads, head_dim] tensor): one cuBLASLt call
/// in pointer-array mode. The launcher turns it into cuBLASLt's
/// column-major form (C^T = B^T A^T).
struct GemmCall {
  int site; // which GEMM of the model: its cuBLASLt plan is cached by site
  bool transA, transB;
  int64_t m, n, k, lda, ldb, ldc;
  int64_t batch, strideA, strideB, strideC; // in elements; batch 1: unused
  DType dtype;
  Epilogue epilogue;
  int64_t outer, outerStrideA, outerStrideB, outerStrideC; // outer <= 1: none
  /// C += op(A) op(B) (beta 1) rather than C = (a sum over chunks).
  bool accumulate;
  /// C in f32 whatever A and B (16-bit products summed across calls).
  bool outputF32;
  /// Bytes at the bottom of the CUDA workspace the op's own kernels hold
  /// across its GEMMs (a chunk of logits): cuBLASLt's workspace starts
  /// above them.
  int64_t reservedWorkspace;
};

/// The pointer tables a GEMM with an outer batch needs (A, B and C for each
/// of its outer x batch products), at the top of the CUDA workspace.
inline int64_t gemmPointerTableBytes(int64_t products) {
  return (3 * 8 * products + 255) / 256 * 256;
}

/// A GemmCall as cuBLASLt (column-major) computes it: D = op(X) op(Y)
/// with X = B and Y = A, since row-major C = op(A) op(B) is column-major
/// C^T = op(B)^T op(A)^T. Each operand's stored matrix is rows x cols with
/// its leading dimension; D is n x m with ld ldc.
struct ColumnMajorGemm {
  bool transX, transY;
  int64_t xRows, xCols, ldx, yRows, yCols, ldy, dRows, dCols, ldd;
  int64_t batch, strideX, strideY, strideD;
};

inline ColumnMajorGemm columnMajor(const GemmCall &c) {
  ColumnMajorGemm g;
  g.transX = c.transB;
  g.transY = c.transA;
  // B is stored (row-major) k x n, or n x k when transposed: column-major
  // that is n x k (ld ldb), or k x n.
  g.xRows = c.transB ? c.k : c.n;
  g.xCols = c.transB ? c.n : c.k;
  g.ldx = c.ldb;
  g.yRows = c.transA ? c.m : c.k;
  g.yCols = c.transA ? c.k : c.m;
  g.ldy = c.lda;
  g.dRows = c.n;
  g.dCols = c.m;
  g.ldd = c.ldc;
  g.batch = c.batch;
  g.strideX = c.strideB;
  g.strideY = c.strideA;
  g.strideD = c.strideC;
  return g;
}

enum class ConvKind : int { Forward = 0, InputGrad = 1, WeightGrad = 2 };

/// An NCHW convolution (cross-correlation, as PyTorch) for cuDNN.
struct ConvCall {
  int site;
  ConvKind kind;
  int64_t n, c, h, w, o, kh, kw, ho, wo, strideH, strideW, padH, padW;
  DType dtype;
};

enum class AttentionKind : int { Forward = 0, Backward = 1 };

/// A 16-bit fused attention that cuDNN's flash-attention engines may run
/// (lang/ops/attention/AttentionCudnn.h): q [b, h, sq, d], k and v [b, hk,
/// skv, d or dv], packed. `seed` is the op's dropout seed.
struct AttentionCall {
  int site;
  AttentionKind kind;
  DType dtype;
  int64_t batch, heads, kvHeads, queries, keys, headDim, valueDim;
  bool causal;
  float scale;
  double dropoutP;
  int64_t seed;
};

/// An attention's tensors: the forward writes output and logSumExp, the
/// backward reads them with gradOutput and writes the three gradients.
struct AttentionTensors {
  const uint8_t *query, *key, *value;
  uint8_t *output, *logSumExp;
  const uint8_t *gradOutput;
  uint8_t *gradQuery, *gradKey, *gradValue;
};

/// The plan's regions on the device.
struct DeviceRegions {
  uint8_t *arena, *parameters, *gradients, *optimizerState, *inputs, *workspace,
      *buffers;
  int64_t *control;
};

/// The most offsets a kernel launched at several sites reads from its
/// launch (runtime/cuda/Kernels.cuh's Regions::site).
constexpr int kMaxSiteOffsets = 12;

/// A generated kernel's one argument: runtime/cuda/Kernels.cuh's Regions,
/// field for field. The executor and the test suite's CUDA emulator build
/// it for each launch.
struct KernelRegions {
  uint8_t *A, *P, *G, *S, *I, *W, *B;
  int64_t *control;
  int64_t index;
  int64_t site[kMaxSiteOffsets];

  KernelRegions(const DeviceRegions &r, int64_t index,
                std::initializer_list<int64_t> offsets)
      : A(r.arena), P(r.parameters), G(r.gradients), S(r.optimizerState),
        I(r.inputs), W(r.workspace), B(r.buffers), control(r.control),
        index(index), site{} {
    // At most kMaxSiteOffsets: codegen/CudaEmitter.cpp shares no kernel
    // that reads more.
    int k = 0;
    for (int64_t offset : offsets)
      site[k++] = offset;
  }
};

/// Implemented by the runtime; a step's host function calls it in the
/// step's order. Everything is enqueued on one stream.
class StepLauncher {
public:
  virtual ~StepLauncher() = default;
  /// `index` is the kernels' Regions::index (a chunk of a host loop);
  /// `site` their Regions::site (at most kMaxSiteOffsets).
  virtual void launch(int kernel, uint32_t gridX, uint32_t gridY,
                      uint32_t block, int64_t index,
                      std::initializer_list<int64_t> site) = 0;
  /// `bias` is read for the bias epilogues, else null.
  virtual void gemm(const GemmCall &call, const uint8_t *a, const uint8_t *b,
                    uint8_t *c, const uint8_t *bias) = 0;
  /// Forward: (x, w) -> y; input grad: (dy, w) -> dx; weight grad:
  /// (dy, x) -> dw.
  virtual void conv(const ConvCall &call, const uint8_t *first,
                    const uint8_t *second, uint8_t *result) = 0;
  /// Runs `call` through cuDNN and returns true, or returns false and the
  /// caller launches Mnemo's own attention kernels. The choice is made
  /// once per problem (forward and backward alike) at its first call.
  virtual bool attention(const AttentionCall &call,
                         const AttentionTensors &tensors) = 0;
  virtual void zero(uint8_t *p, int64_t bytes) = 0;
  /// Data parallelism (runtime/Model.h's GradientExchange): bucket k's
  /// gradients are final / about to be read.
  virtual void gradientsReady(int bucket) = 0;
  virtual void awaitGradients(int bucket) = 0;
  /// ZeRO-1 (the plan's shardBytes): sums an f32 scalar at `value` over the
  /// ranks in place, in order on the step's stream (the sums of squares of
  /// the ranks' parts of the gradients, for the gradient norm).
  virtual void sumOverRanks(uint8_t *value) = 0;
  /// ZeRO-1: each rank updated its part of the parameters; after this,
  /// every rank has all of them (in order on the step's stream).
  virtual void gatherParameters() = 0;
  /// Brackets each op for --profile (events); no-ops otherwise.
  virtual void beginOp(int op) = 0;
  virtual void endOp(int op) = 0;

  DeviceRegions regions;
  /// ZeRO-1: this process's rank, whose parts of the gradient region and
  /// optimizer state its updates take (the kernels' Regions::index there).
  int64_t shardRank = 0;
};

struct CudaStepInfo {
  /// Null when the model has no such step.
  void (*run)(StepLauncher &launcher);
  int numOps;
  const char *const *opNames;
};

struct CudaModelInfo {
  /// The kernels of both steps, for NVRTC; it #includes
  /// "mnemo/Kernels.cuh", which the runtime supplies.
  const char *kernelSource;
  int numKernels;
  const char *const *kernelNames;
  /// The workspace the CUDA steps need (cuBLASLt, cuDNN, partial sums):
  /// part of the one device allocation.
  int64_t workspaceBytes;
  CudaStepInfo trainStep, evalStep;
  /// Why these steps cannot run on the GPU (an op whose library this CUDA
  /// toolkit lacks), or null.
  const char *unsupported;
};

} // namespace mnemo::cuda

/// Defined by the generated CUDA code (model_cuda.cpp).
extern "C" const mnemo::cuda::CudaModelInfo *mnemoCudaModel();

#endif // MNEMO_RUNTIME_CUDA_CUDAMODEL_H
