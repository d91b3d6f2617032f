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

#include "lang/MnemoInterfaces.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace mnemo {
namespace codegen {

class CpuKernelContext {
public:
  virtual ~CpuKernelContext() = default;
  /// A pointer to `v`'s contiguous elements (a splat constant gets an array
  /// of its own); an error on the op when there is none.
  virtual mlir::FailureOr<std::string> operand(mlir::Value v) = 0;
  /// The pointer to result `i`.
  virtual std::string result(unsigned i = 0) = 0;
  /// The name of a static int64_t array holding `values` (a shape, for
  /// kernels that take one).
  virtual std::string constantArray(llvm::ArrayRef<int64_t> values) = 0;
  /// Where the op's statements go (inside its profiling scope).
  virtual llvm::raw_ostream &out() = 0;
  /// Makes the generated file include `header`, a path from the source
  /// root (the family's CPU kernels).
  virtual void include(llvm::StringRef header) = 0;
  /// A float pointer to `bytes` of the plan's CPU workspace, valid while
  /// the op runs. The op declares its need (CpuWorkspaceOpInterface, in
  /// its family's FAMILYOps.cpp); asking for more is an internal error.
  virtual mlir::FailureOr<std::string> workspace(int64_t bytes) = 0;
};

/// One row-major product C [m, n] = op(A) op(B) for cuBLASLt (GemmCall,
/// runtime/cuda/CudaModel.h); `type` names its DType (F32, BF16, F16, or
/// I8: int8 operands, int32 products in C).
struct CudaGemm {
  mlir::Value a, b, c;
  bool transposeA = false, transposeB = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  llvm::StringRef type = "F32";
};

/// One cuDNN convolution (ConvCall, runtime/cuda/CudaModel.h): `kind` is
/// Forward, InputGrad or WeightGrad, its operands and result those of a
/// conv2d, conv2d_input_grad or conv2d_weight_grad in the plan.
struct CudaConvolution {
  llvm::StringRef kind;
  mlir::Value first, second, result;
  ConvGeometry geometry;
};

class CudaKernelContext {
public:
  virtual ~CudaKernelContext() = default;
  /// A device pointer to `v`'s contiguous elements, for a kernel body.
  virtual std::string operand(mlir::Value v) = 0;
  virtual std::string result(unsigned i = 0) = 0;
  /// The C type of `v`'s elements in device code (float, bf16_t, f16_t).
  virtual std::string elementType(mlir::Value v) = 0;
  /// One kernel whose body is `statement`, launched on a grid of `blocks`
  /// (by `blocksY`) blocks of `threads` threads.
  virtual void launch(const std::string &statement, int64_t blocks, int threads,
                      int64_t blocksY = 1) = 0;
  /// A cuBLASLt product on the step's stream, in order with the op's
  /// kernels; its operands must live in the plan, contiguous.
  virtual void gemm(const CudaGemm &product) = 0;
  /// A cuDNN convolution on the step's stream, in order with the op's
  /// kernels.
  virtual void convolution(const CudaConvolution &convolution) = 0;
  /// Where `v` lives as a TensorRef initializer ("{region, offset,
  /// elements}", runtime/cuda/Kernels.cuh), for device tables of tensors
  /// that one kernel walks (the kernel resolves it against its Regions
  /// `r`); an error on the op when `v` is a constant, not in the plan.
  virtual mlir::FailureOr<std::string> tensorRef(mlir::Value v) = 0;
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

/// Attaches every op family's CPU and CUDA models (CpuKernelOpInterface,
/// CudaKernelOpInterface) to `context`'s ops: the register*Models function
/// of each lang/ops/*/*Emission.cpp that has one, called from a file
/// lang/CMakeLists.txt generates. Attaching again changes nothing.
void registerFamilyEmissionModels(mlir::MLIRContext &context);

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

} // namespace codegen
} // namespace mnemo

#endif // MNEMO_CODEGEN_KERNELCONTEXT_H
