//===- Workspace.h - Scratch memory of ops that need it ---------*- C++ -*-===//
//
// Some kernels need scratch memory beyond their results: the CPU backend's
// convolutions lower to im2col + GEMM, and an op family's ops declare what
// theirs need (CpuWorkspaceOpInterface, CudaScratchOpInterface). The plan
// accounts for it: one workspace, as large as the largest op needs, allocated
// with the arena (the step plan's workspace_bytes). The backends size their
// scratch with the same functions, so the two cannot disagree.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_WORKSPACE_H
#define MNEMO_PASSES_WORKSPACE_H

#include <cstdint>

namespace mlir {
class Operation;
} // namespace mlir

namespace mnemo {

/// Scratch bytes `op` needs on the CPU backend (0 for most ops).
int64_t workspaceBytes(mlir::Operation *op);

/// The CUDA backend's workspace (the step plan's cuda_workspace_bytes):
/// cuBLASLt's 32 MiB (what NVIDIA recommends for Hopper's kernels, as PyTorch
/// gives it there) when the step has a matrix product or a convolution, and at
/// least what any op's kernels need for partial sums (cudaScratchBytes: what
/// the op declares through CudaScratchOpInterface) or cuDNN may use (the
/// CPU's workspace). CudaEmitter checks that it stays within the plan's
/// figure.
constexpr int64_t kCublasLtWorkspaceBytes = 32 << 20;
int64_t cudaScratchBytes(mlir::Operation *op);
/// A matrix product's pointer tables when its batch dimensions do not
/// flatten (runtime/cuda/CudaModel.h's GemmCall::outer), at the top of the
/// workspace: counted for every batched product, 24 bytes a product.
int64_t gemmPointerTableBytes(mlir::Operation *op);
/// Blocks of the two-pass sum of squares (mse, the global norm).
int64_t sumOfSquaresBlocks(int64_t elements);

} // namespace mnemo

#endif // MNEMO_PASSES_WORKSPACE_H
