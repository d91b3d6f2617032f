// fuse-elementwise: producers computed inside their consumer's loop get no
// buffer, and what they read stays live until that loop runs.
// RUN: mnemo-opt %s --fuse-elementwise --plan-memory | FileCheck %s
// Run inside the arena, the fused and planned function computes what the
// original does (a liveness mistake would overwrite an input of a fused
// loop before the loop reads it).
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(fuse-elementwise,plan-memory)' --arena | FileCheck %s --check-prefix=SAME
// SAME: @eval_step: 2 results agree

func.func @eval_step(%x: tensor<16x32xf32> {mnemo.role = "input", mnemo.name = "x"},
                     %w: tensor<32x32xf32> {mnemo.role = "param", mnemo.name = "w"},
                     %b: tensor<32xf32> {mnemo.role = "param", mnemo.name = "b"})
    -> (tensor<f32> {mnemo.name = "loss"}, tensor<16x32xf32> {mnemo.name = "output"}) {
  %h = mnemo.matmul %x, %w : (tensor<16x32xf32>, tensor<32x32xf32>) -> tensor<16x32xf32>
  %bb = mnemo.broadcast %b : (tensor<32xf32>) -> tensor<16x32xf32>
  %a = mnemo.add %h, %bb : tensor<16x32xf32>
  %t = mnemo.tanh %a : tensor<16x32xf32>
  %e = mnemo.exp %x : tensor<16x32xf32>
  // %e has two consumers: it is stored, not recomputed.
  %m = mnemo.mul %t, %e : tensor<16x32xf32>
  %o = mnemo.add %m, %e : tensor<16x32xf32>
  %s = mnemo.sum %o {axes = array<i64: 0, 1>} : (tensor<16x32xf32>) -> tensor<f32>
  return %s, %o : tensor<f32>, tensor<16x32xf32>
}

// CHECK-LABEL: func.func @eval_step
// CHECK: %[[H:.*]] = mnemo.matmul {{.*}}offsets = {{\[}}[[HOFF:[0-9]+]]]
// The broadcast, the bias add, tanh and the multiply run in the final add's
// loop: no buffers.
// CHECK: mnemo.broadcast {{.*}}{mnemo.fused, mnemo.placement = #mnemo.placement<offsets = [-1], sizes = [0]>}
// CHECK: mnemo.add %[[H]], {{.*}}{mnemo.fused, mnemo.placement = #mnemo.placement<offsets = [-1], sizes = [0]>}
// CHECK: mnemo.tanh {{.*}}{mnemo.fused, mnemo.placement = #mnemo.placement<offsets = [-1], sizes = [0]>}
// CHECK: %[[E:.*]] = mnemo.exp {{.*}}mnemo.placement = #mnemo.placement<offsets = {{\[}}[[EOFF:[0-9]+]]], sizes = [2048]>}
// The matmul's buffer is still live here (the fused add reads it in this
// loop): exp did not take it.
// CHECK-NOT: offsets = {{\[}}[[HOFF]]]{{.*}}mnemo.exp
// CHECK: mnemo.mul {{.*}}mnemo.fused
// The loop's result is returned: stored, and it may take over the matmul's
// buffer, which it reads at the same index and which dies here.
// CHECK: mnemo.add {{.*}}{mnemo.placement = #mnemo.placement<offsets = {{\[}}[[HOFF]]], sizes = [2048]>}
// CHECK-NOT: mnemo.fused
