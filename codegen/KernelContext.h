//===- KernelContext.h - What an op family's emission model sees *- C++ -*-===//
//
// The CPU and CUDA emitters give an op family's code generation model
// (lang/ops/FAMILY/FAMILYEmission.cpp, the op's CpuKernelOpInterface and
// CudaKernelOpInterface) this view of the step being emitted: where the
// op's operands and results are, where its code goes, and which of the
// family's kernel headers the generated file must include.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_CODEGEN_KERNELCONTEXT_H
#define MNEMO_CODEGEN_KERNELCONTEXT_H

// registerFamilyEmissionModels: attaches every op family's CPU and CUDA
// models (CpuKernelOpInterface, CudaKernelOpInterface), the
// register*Models function of each lang/ops/*/*Emission.cpp that has one;
// attaching again changes nothing. lang/CMakeLists.txt generates it.
#include "lang/FamilyEmissionModels.h"
#include "lang/MnemoInterfaces.h"
#include "lang/ops/attention/AttentionFormulas.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace mnemo::codegen {

struct GemmProblem;

class CpuKernelContext {
public:
  virtual ~CpuKernelContext() = default;
  /// A pointer to `v`'s contiguous elements (a splat constant gets an array
  /// of its own). Where there is none, the error is on the op and its
  /// emission fails (as with the CUDA context's operands and scratch).
  virtual std::string operand(mlir::Value v) = 0;
  /// The pointers of `values`, in order.
  std::vector<std::string> operands(mlir::ValueRange values) {
    std::vector<std::string> pointers;
    for (mlir::Value v : values)
      pointers.push_back(operand(v));
    return pointers;
  }
  /// The pointer to result `i`.
  virtual std::string result(unsigned i = 0) = 0;
  /// The name of a static int64_t array holding `values` (a shape, for
  /// kernels that take one).
  virtual std::string constantArray(llvm::ArrayRef<int64_t> values) = 0;
  /// The name of a namespace-scope object of the generated file, of
  /// `type` and built from `arguments` (a constructor's argument list)
  /// before main: state an op sets up once, before the first step (its
  /// library primitives).
  virtual std::string fileScopeObject(llvm::StringRef type,
                                      llvm::StringRef arguments) = 0;
  /// Where the op's statements go (inside its profiling scope).
  virtual llvm::raw_ostream &out() = 0;
  /// Makes the generated file include `header`, a path from the source
  /// root (the family's CPU kernels).
  virtual void include(llvm::StringRef header) = 0;
  /// Includes `header` and writes `  statement;`, a kernel call: the whole
  /// code of most ops.
  mlir::LogicalResult call(llvm::StringRef header,
                           const llvm::Twine &statement) {
    include(header);
    out() << "  " << statement << ";\n";
    return mlir::success();
  }
  /// A float pointer to `bytes` of the plan's CPU workspace, valid while
  /// the op runs. The op declares its need (CpuWorkspaceOpInterface, in
  /// its family's FAMILYOps.cpp); asking for more is an internal error.
  virtual std::string workspace(int64_t bytes) = 0;
  /// The op's two operands and result as a GEMM (StepLayout.h), the
  /// operands read transposed as given; an error on the op if they cannot
  /// be one.
  virtual mlir::FailureOr<GemmProblem> gemmProblem(bool transposeA,
                                                   bool transposeB) = 0;
  /// The op's result as one generated loop over its elements, reading the
  /// operand through its strides (a materialized view or broadcast).
  virtual mlir::LogicalResult copyLoop() = 0;
  /// An error on the op, worded as the backend's other errors.
  virtual mlir::InFlightDiagnostic error(const llvm::Twine &message) = 0;
};

/// One row-major product C [m, n] = op(A) op(B) for cuBLASLt (GemmCall,
/// runtime/cuda/CudaModel.h); `type` names its DType (F32, BF16, F16, or
/// I8: int8 operands, int32 products in C).
struct CudaGemm {
  mlir::Value a, b, c;
  bool transposeA = false, transposeB = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  llvm::StringRef type = "F32";
  /// A and B may be strided views (their strides are the transposes and
  /// leading dimensions); otherwise they must be contiguous.
  bool stridedOperands = false;
  /// A strided batch of products (strides in elements), and an outer batch
  /// over it (0: none) that the runtime walks through pointer tables.
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  int64_t outer = 0, outerStrideA = 0, outerStrideB = 0, outerStrideC = 0;
  /// cuBLASLt's epilogue (None, Bias, ReluBias) and its bias row.
  llvm::StringRef epilogue = "None";
  mlir::Value bias;
  /// Host pointer expressions (uint8_t *) that replace a, b or c where an
  /// operand is a piece of a value (a chunk's rows) or the op's scratch;
  /// the value then only names the element type.
  std::string aAt, bAt, cAt;
  /// C += op(A) op(B); C in f32 for 16-bit A and B; the bottom bytes of
  /// the workspace the op's kernels hold across the call (GemmCall's).
  bool accumulate = false, outputF32 = false;
  int64_t reservedWorkspace = 0;
};

/// The elementwise root a matrix product computes in its cuBLASLt epilogue
/// (the CUDA emitter's choice: the next op, a bias add or a ReLU of one):
/// the product writes `root`'s result. Null `root`: none.
struct CudaEpilogue {
  mlir::Operation *root = nullptr;
  mlir::Value bias;
  llvm::StringRef kind;
};

/// One cuDNN convolution (ConvCall, runtime/cuda/CudaModel.h): `kind` is
/// Forward, InputGrad or WeightGrad, its operands and result those of a
/// conv2d, conv2d_input_grad or conv2d_weight_grad in the plan.
struct CudaConvolution {
  llvm::StringRef kind;
  mlir::Value first, second, result;
  ConvGeometry geometry;
};

/// A 16-bit fused attention that cuDNN may run (AttentionCall,
/// runtime/cuda/CudaModel.h): `forward` or the backward; the tensors are
/// those of an attention (query, key, value -> output, logSumExp) or an
/// attention_grad (and gradOutput -> gradQuery, gradKey, gradValue).
struct CudaAttention {
  bool forward;
  mlir::Value query, key, value, output, logSumExp, gradOutput, gradQuery,
      gradKey, gradValue;
  attention::AttentionGeometry geometry;
};

class CudaKernelContext {
public:
  virtual ~CudaKernelContext() = default;
  /// A device pointer to `v`'s contiguous elements, for a kernel body.
  virtual std::string operand(mlir::Value v) = 0;
  std::vector<std::string> operands(mlir::ValueRange values) {
    std::vector<std::string> pointers;
    for (mlir::Value v : values)
      pointers.push_back(operand(v));
    return pointers;
  }
  virtual std::string result(unsigned i = 0) = 0;
  /// operand(v) and result(i) `elements` further on, folded into the
  /// region's offset: kernels that differ only in such offsets compile to
  /// one kernel that reads them from its launch (a slice's start, a
  /// concatenation's place along its axis).
  virtual std::string operandAt(mlir::Value v, int64_t elements) = 0;
  virtual std::string resultAt(unsigned i, int64_t elements) = 0;
  /// The C type of `v`'s elements in device code (float, bf16_t, f16_t).
  virtual std::string elementType(mlir::Value v) = 0;
  /// One kernel whose body is `statement`, launched on a grid of `blocks`
  /// (by `blocksY`) blocks of `threads` threads.
  virtual void launch(const std::string &statement, int64_t blocks, int threads,
                      int64_t blocksY = 1) = 0;
  /// A cuBLASLt product on the step's stream, in order with the op's
  /// kernels; its operands must live in the plan (contiguous unless
  /// `stridedOperands`).
  virtual void gemm(const CudaGemm &product) = 0;
  /// Host code around the op's launches and products: a loop over chunks
  /// (`for (int64_t chunk = 0; chunk < n; ++chunk) {`, then `}`), whose
  /// variable the kernels see as Regions::index (launchIndexed).
  virtual void hostCode(const std::string &line) = 0;
  /// As launch, with `index` (a host expression) as the kernel's r.index.
  virtual void launchIndexed(const std::string &statement, int64_t blocks,
                             int threads, const std::string &index) = 0;
  /// `v`'s address in the host code (uint8_t *), for products on pieces
  /// of it (CudaGemm's aAt, bAt, cAt); `v` must live in the plan.
  virtual std::string hostOperand(mlir::Value v) = 0;
  /// The op's scratch (scratch(bytes)) as the host code addresses it.
  virtual std::string hostScratch(int64_t bytes) = 0;
  /// A cuDNN convolution on the step's stream, in order with the op's
  /// kernels.
  virtual void convolution(const CudaConvolution &convolution) = 0;
  /// Opens host code that runs `attention` through cuDNN or else (the
  /// launches that follow, up to hostCode("}")) Mnemo's kernels: the
  /// executor decides once per problem (StepLauncher::attention). Sites
  /// are numbered across the steps.
  virtual void cudnnAttentionOrElse(const CudaAttention &attention) = 0;
  /// Where `v` lives as a TensorRef initializer ("{region, offset,
  /// elements}", runtime/cuda/Kernels.cuh), for device tables of tensors
  /// that one kernel walks (the kernel resolves it against its Regions
  /// `r`). Where `v` is a constant, not in the plan, the error is on the op
  /// and its emission fails.
  std::string tensorRef(mlir::Value v) { return tensorRef(v, 0, -1); }
  /// As tensorRef(v), for `count` elements of `v` from element `first`
  /// (count -1: to its end): ZeRO-1's updates walk a rank's parts.
  virtual std::string tensorRef(mlir::Value v, int64_t first,
                                int64_t count) = 0;
  /// Declares `__device__ const type name[] = {entries};` at file scope,
  /// before the op's kernels, and returns its name (unique in the file).
  virtual std::string deviceTable(llvm::StringRef type,
                                  llvm::ArrayRef<std::string> entries) = 0;
  /// A pointer (uint8_t *, 256-byte aligned) to `bytes` of scratch for the
  /// op's kernels, valid until its last kernel ends. The plan's workspace
  /// holds it: the op declares its need (CudaScratchOpInterface, in its
  /// family's FAMILYOps.cpp), and asking for more is an internal error.
  virtual std::string scratch(int64_t bytes) = 0;
  /// Zeroes result `v` on the host before the op's kernels run (for
  /// kernels that accumulate into it).
  virtual void zero(mlir::Value v) = 0;
  /// An error on the op, worded as the backend's other errors (a type or
  /// shape the CUDA kernels do not take): no CUDA code is generated.
  virtual mlir::InFlightDiagnostic error(const llvm::Twine &message) = 0;
  /// The op cannot run on the GPU with this toolkit (a library it lacks):
  /// the CUDA code is generated without it, the executor refuses to start
  /// with `why`, and the CPU backend still runs the program.
  virtual void refuse(const std::string &why) = 0;
  /// Makes the kernels' source include `header`, a path from the source
  /// root (the family's device functions; NVRTC is given every family's).
  virtual void include(llvm::StringRef header) = 0;
  /// The updates the op's launch makes: the op alone, or for a
  /// CudaMultiTensorOpInterface op the group the emitter formed, the op
  /// first.
  virtual llvm::ArrayRef<mlir::Operation *> group() = 0;
  /// `v` as a multi-tensor launch reads it: when the multiply that produced
  /// `v` is folded into the launch (CudaMultiTensorOpInterface), its
  /// unscaled operand and the scalar; otherwise `v` and null.
  struct ScaledValue {
    mlir::Value value, scale;
  };
  virtual ScaledValue foldedScale(mlir::Value v) = 0;
  /// As CpuKernelContext's.
  virtual mlir::FailureOr<GemmProblem> gemmProblem(bool transposeA,
                                                   bool transposeB) = 0;
  virtual mlir::LogicalResult copyLoop() = 0;
  /// The root the op's product absorbs into its epilogue, if any.
  virtual CudaEpilogue epilogue() = 0;
};

/// The CPU and CUDA models of an op whose code is a function of its own
/// type per backend: `KernelFunctions<Op, emitCpu, emitCuda>::attach`
/// instead of two external models written out.
template <typename Op, mlir::LogicalResult (*EmitCpu)(Op, CpuKernelContext &),
          mlir::LogicalResult (*EmitCuda)(Op, CudaKernelContext &)>
struct KernelFunctions {
  struct Cpu : CpuKernelOpInterface::ExternalModel<Cpu, Op> {
    mlir::LogicalResult emitCpuKernel(mlir::Operation *op,
                                      CpuKernelContext &context) const {
      return EmitCpu(llvm::cast<Op>(op), context);
    }
  };
  struct Cuda : CudaKernelOpInterface::ExternalModel<Cuda, Op> {
    mlir::LogicalResult emitCudaKernel(mlir::Operation *op,
                                       CudaKernelContext &context) const {
      return EmitCuda(llvm::cast<Op>(op), context);
    }
  };
  static void attach(mlir::MLIRContext &context) {
    Op::template attachInterface<Cpu, Cuda>(context);
  }
};

/// Threads of a block for grid-stride loops.
constexpr int kCudaThreads = 256;

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Threads for one block per row of n: a multiple of 32, at most 1024.
inline int rowThreads(int64_t n) {
  return int(
      std::min<int64_t>(1024, std::max<int64_t>(32, ceilDiv(n, 32) * 32)));
}

/// Blocks for a grid-stride loop over n items.
inline int64_t gridFor(int64_t n, int threads = kCudaThreads) {
  return std::max<int64_t>(1, std::min<int64_t>(ceilDiv(n, threads), 1 << 20));
}

} // namespace mnemo::codegen

#endif // MNEMO_CODEGEN_KERNELCONTEXT_H
