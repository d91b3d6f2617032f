//===- NoCuda.cpp - The device executor of a trainer without CUDA ---------===//
//
// Linked instead of runtime/cuda/ when the trainer is built without the
// CUDA toolkit: the trainer runs on the CPU and says why when asked for a
// GPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/Executor.h"

bool mnemo::runtime::cudaBuiltIn() { return false; }

bool mnemo::runtime::cudaDeviceAvailable(std::string &why) {
  why = "this trainer was built without the CUDA backend (no CUDA toolkit "
        "when it was built)";
  return false;
}

std::unique_ptr<mnemo::runtime::DeviceExecutor>
mnemo::runtime::makeCudaExecutor(const ModelInfo &, const CudaSettings &,
                                 std::string &error) {
  cudaDeviceAvailable(error);
  return nullptr;
}
