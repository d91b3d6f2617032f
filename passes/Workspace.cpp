//===- Workspace.cpp - Scratch memory of ops that need it -----------------===//

#include "passes/Workspace.h"
#include "passes/MemoryPlanner.h"

#include "lang/MnemoOps.h"

using namespace mlir;
using namespace mnemo;

int64_t mnemo::workspaceBytes(Operation *op) {
  // The ops declare their needs (their family's FAMILYOps.cpp).
  if (auto declared = llvm::dyn_cast<CpuWorkspaceOpInterface>(op))
    return alignUp(declared.getCpuWorkspaceBytes());
  return 0;
}

//===----------------------------------------------------------------------===//
// The CUDA backend's scratch
//===----------------------------------------------------------------------===//

namespace {
int64_t align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }
} // namespace

int64_t mnemo::cudaScratchBytes(Operation *op) {
  // The ops declare their needs: partial sums, cuBLASLt's and cuDNN's
  // workspaces.
  if (auto declared = llvm::dyn_cast<CudaScratchOpInterface>(op))
    return align256(declared.getCudaScratchBytes());
  return 0;
}
