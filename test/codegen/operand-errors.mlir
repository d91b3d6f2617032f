// An operand a kernel cannot read (here a half-precision constant, which
// has no array of its own) is one error on its op, and the emission fails
// cleanly on both backends (KernelContext.h's operand: the op's emission
// fails after it, with no second error).
// RUN: mnemo-opt %s --pass-pipeline='builtin.module(schedule,fuse-elementwise,plan-memory)' -o %t.mlir
// RUN: not mnemo-translate --mnemo-to-cpp %t.mlir 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not mnemo-translate --mnemo-to-cuda %t.mlir 2>&1 | FileCheck %s --check-prefix=CUDA
// CPU: error: the CPU backend: a kernel operand is a half-precision constant
// CPU-NOT: error:
// CUDA: error: the CUDA backend: a kernel operand is a half-precision constant
// CUDA-NOT: error:

module attributes {mnemo.model = "HalfConstant"} {
  func.func @eval_step(%x: tensor<4x8xbf16> {mnemo.name = "x", mnemo.role = "input"})
      -> (tensor<8xbf16> {mnemo.name = "s"}) {
    %c = mnemo.constant dense<2.0> : tensor<4x8xbf16>
    %s = mnemo.sum %c {axes = array<i64: 0>} : (tensor<4x8xbf16>) -> tensor<8xbf16>
    return %s : tensor<8xbf16>
  }
}
