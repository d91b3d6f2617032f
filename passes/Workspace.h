//===- Workspace.h - Scratch memory of ops that need it ---------*- C++ -*-===//
//
// Some kernels need scratch memory beyond their results (the CPU backend's
// convolutions lower to im2col + GEMM, cuBLASLt wants a workspace): an op
// declares what its kernels need (CpuWorkspaceOpInterface,
// CudaScratchOpInterface, in its family's FAMILYOps.cpp). The plan
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

/// The CUDA backend's workspace (the step plan's cuda_workspace_bytes): at
/// least what any op's CUDA code declares (CudaScratchOpInterface: partial
/// sums, cuBLASLt's and cuDNN's workspaces) or the CPU's workspace (which
/// bounds cuDNN's). CudaEmitter checks that it stays within the plan's
/// figure.
int64_t cudaScratchBytes(mlir::Operation *op);

} // namespace mnemo

#endif // MNEMO_PASSES_WORKSPACE_H
