// fuse-elementwise does not sum a weight's gradient terms in one loop when
// the backward produces them far apart: each add runs as its term comes,
// so one term and the running sum are live, not every term until the last
// add (a weight used 32 times kept 32 terms; issue 20, item 8).
// RUN: mnemo-opt %s --fuse-elementwise --plan-memory | FileCheck %s
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(fuse-elementwise,plan-memory)' --arena | FileCheck %s --check-prefix=SAME
// SAME: @eval_step: 1 results agree

func.func @eval_step(%x: tensor<64x64xf32> {mnemo.role = "input", mnemo.name = "x"},
                     %w: tensor<64x64xf32> {mnemo.role = "param", mnemo.name = "w"})
    -> (tensor<f32> {mnemo.name = "loss"}) {
  // Six terms, each a product of the inputs, summed as they come.
  %t1 = mnemo.matmul %x, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %t2 = mnemo.matmul %w, %x : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %s1 = mnemo.add %t1, %t2 : tensor<64x64xf32>
  %t3 = mnemo.matmul %x, %x : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %s2 = mnemo.add %s1, %t3 : tensor<64x64xf32>
  %t4 = mnemo.matmul %w, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %s3 = mnemo.add %s2, %t4 : tensor<64x64xf32>
  %t5 = mnemo.matmul %x, %w {transpose_rhs = true} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %s4 = mnemo.add %s3, %t5 : tensor<64x64xf32>
  %t6 = mnemo.matmul %w, %x {transpose_rhs = true} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %s5 = mnemo.add %s4, %t6 : tensor<64x64xf32>
  // Adjacent elementwise ops still run in one loop.
  %e = mnemo.exp %s5 : tensor<64x64xf32>
  %n = mnemo.neg %e : tensor<64x64xf32>
  %l = mnemo.sum %n {axes = array<i64: 0, 1>} : (tensor<64x64xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @eval_step
// The running sum (each add in place) and one term: 2 x 16 KiB, where one
// loop over all six terms would keep six (96 KiB).
// CHECK-SAME: arena_bytes = 32768,
// CHECK: %[[S1:.*]] = mnemo.add
// CHECK-NOT: mnemo.fused
// CHECK-SAME: offsets
// CHECK: %[[S2:.*]] = mnemo.add %[[S1]]
// CHECK-NOT: mnemo.fused
// CHECK-SAME: offsets
// CHECK: mnemo.exp {{.*}}mnemo.fused
