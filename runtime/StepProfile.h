//===- StepProfile.h - Where a training step's time goes --------*- C++ -*-===//
//
// train --profile times every op of the step (on the CPU around each op's
// code, on the GPU with events) and prints, after the run, the ops that
// make up most of the step and the same time by kind of op.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_STEPPROFILE_H
#define MNEMO_RUNTIME_STEPPROFILE_H

#include <cstdint>

namespace mnemo::runtime {

/// Prints the profile of `profiledSteps` steps: `opSeconds[i]` is op i's
/// total time over them, `opNames[i]` its name ("h.0.attn mnemo.matmul").
void printStepProfile(const double *opSeconds, const char *const *opNames,
                      int numOps, int64_t profiledSteps);

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_STEPPROFILE_H
