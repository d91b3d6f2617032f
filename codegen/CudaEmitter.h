//===- CudaEmitter.h - CUDA for the GPU backend -----------------*- C++ -*-===//
//
// Turns a planned module (after plan-memory) into the CUDA version of its
// steps: kernel source for NVRTC (generated elementwise kernels and thin
// wrappers around runtime/cuda/Kernels.cuh) and host C++ that enqueues each
// step through runtime/cuda/CudaModel.h's StepLauncher (kernel launches,
// cuBLASLt GEMMs, cuDNN convolutions). Every tensor lives at the same
// offset as in the CPU code, in one device allocation.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_CODEGEN_CUDAEMITTER_H
#define MNEMO_CODEGEN_CUDAEMITTER_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mnemo {

struct CudaCode {
  /// The kernels of every step, for NVRTC (#include "mnemo/Kernels.cuh").
  std::string kernels;
  /// model_cuda.cpp: the host functions and the CudaModelInfo, with the
  /// kernel source embedded.
  std::string host;
};

/// Fails with an error on the offending op when the CUDA backend does not
/// support it (the message says what).
mlir::FailureOr<CudaCode> emitCuda(mlir::ModuleOp module,
                                   llvm::StringRef sourceFile);

} // namespace mnemo

#endif // MNEMO_CODEGEN_CUDAEMITTER_H
