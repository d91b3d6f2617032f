//===- DeviceLayout.h - The CUDA executor's one allocation ------*- C++ -*-===//
//
// How the one device allocation is cut: the plan's regions, the CUDA
// workspace, a second batch buffer (the next step's batch is copied there
// while this one computes) and the control block (the dropout step, the
// error flag). The CUDA executor and the test suite's emulated executor
// both lay their memory out with it, so the emulator checks the kernels
// against the layout the GPU gets.
//
// Part of the runtime: no LLVM, no CUDA header.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_CUDA_DEVICELAYOUT_H
#define MNEMO_RUNTIME_CUDA_DEVICELAYOUT_H

#include "runtime/Executor.h"
#include "runtime/cuda/CudaModel.h"

#include <algorithm>
#include <cstdint>

namespace mnemo::cuda {

constexpr int64_t kDeviceAlignment = 256;
/// Control block slots: dropout step, error flag, error value, spare.
constexpr int kControlSlots = 4;
/// The dropout step's slot (Kernels.cuh's kDropoutStep).
constexpr int kDropoutStepSlot = 0;

inline int64_t deviceAligned(int64_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

/// The one device allocation for regions of these sizes (each aligned;
/// two batch buffers; the control block): what the memory report counts
/// as a step's peak on a GPU (mnemoc --device=cuda).
inline int64_t deviceAllocationBytes(int64_t parameters, int64_t gradients,
                                     int64_t optimizerState, int64_t inputs,
                                     int64_t arena, int64_t workspace,
                                     int64_t buffers) {
  return deviceAligned(parameters) + deviceAligned(buffers) +
         deviceAligned(gradients) + deviceAligned(optimizerState) +
         2 * deviceAligned(std::max<int64_t>(inputs, 1)) +
         deviceAligned(arena) + deviceAligned(std::max<int64_t>(workspace, 1)) +
         deviceAligned(kControlSlots * 8);
}

struct DeviceLayout {
  /// The parts' sizes, in allocation order.
  int64_t parameters, buffers, gradients, optimizerState, inputs, arena,
      workspace, control;
  int64_t total() const {
    return parameters + buffers + gradients + optimizerState + 2 * inputs +
           arena + workspace + control;
  }

  DeviceLayout(const runtime::PlanRegions &plan, int64_t workspaceBytes)
      : parameters(deviceAligned(plan.parameters)),
        buffers(deviceAligned(plan.buffers)),
        gradients(deviceAligned(plan.gradients)),
        optimizerState(deviceAligned(plan.optimizerState)),
        inputs(deviceAligned(std::max<int64_t>(plan.inputs, 1))),
        arena(deviceAligned(plan.arena)),
        workspace(deviceAligned(std::max<int64_t>(workspaceBytes, 1))),
        control(deviceAligned(kControlSlots * 8)) {}

  /// Points `regions` (and the two batch buffers) into `block`; the first
  /// batch buffer is the current one.
  void place(uint8_t *block, DeviceRegions &regions,
             uint8_t *batchBuffers[2]) const {
    uint8_t *at = block;
    auto take = [&](uint8_t *&field, int64_t bytes) {
      field = at;
      at += bytes;
    };
    take(regions.parameters, parameters);
    take(regions.buffers, buffers);
    take(regions.gradients, gradients);
    take(regions.optimizerState, optimizerState);
    take(batchBuffers[0], inputs);
    take(regions.arena, arena);
    take(regions.workspace, workspace);
    take(batchBuffers[1], inputs);
    regions.control = reinterpret_cast<int64_t *>(at);
    regions.inputs = batchBuffers[0];
  }
};

} // namespace mnemo::cuda

#endif // MNEMO_RUNTIME_CUDA_DEVICELAYOUT_H
