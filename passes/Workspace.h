//===- Workspace.h - Scratch memory of ops that need it ---------*- C++ -*-===//
//
// Some kernels need scratch memory beyond their results: the CPU backend's
// convolutions lower to im2col + GEMM. The plan accounts for it: one
// workspace, as large as the largest op needs, allocated with the arena
// (`mnemo.workspace_bytes` on the function). The backends size their
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

/// The convolution of a (conv2d, conv2d_input_grad, conv2d_weight_grad) op
/// in the forward convolution's terms.
struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, ho, wo;
  int64_t strideH, strideW, padH, padW;
  /// Images per im2col + GEMM: as many as fit a few MiB of scratch, so the
  /// GEMMs are large without the workspace growing with the batch.
  int64_t imagesPerGemm;
};

/// False when `op` is not a convolution.
bool convGeometry(mlir::Operation *op, ConvGeometry &geometry);

/// Scratch bytes `op` needs on the CPU backend (0 for most ops).
int64_t workspaceBytes(mlir::Operation *op);

} // namespace mnemo

#endif // MNEMO_PASSES_WORKSPACE_H
