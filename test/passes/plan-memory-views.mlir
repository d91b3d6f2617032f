// plan-memory: transposes are strided views; a reshape of one is a copy;
// in-place writes never go over a view.
// RUN: mnemo-opt %s --plan-memory | FileCheck %s
// The planned function, run inside its arena, computes what the original does.
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(plan-memory)' --arena | FileCheck %s --check-prefix=SAME
// SAME: @eval_step: 1 results agree

func.func @eval_step(%x: tensor<2x8x4x16xf32> {mnemo.role = "input", mnemo.name = "x"})
    -> (tensor<f32> {mnemo.name = "loss"}) {
  %e = mnemo.exp %x : tensor<2x8x4x16xf32>
  %t = mnemo.transpose %e {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %s = mnemo.batch_matmul %t, %t {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %n = mnemo.neg %t : tensor<2x4x8x16xf32>
  %r = mnemo.reshape %t : (tensor<2x4x8x16xf32>) -> tensor<2x4x128xf32>
  %a = mnemo.sum %s {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x4x8x8xf32>) -> tensor<f32>
  %b = mnemo.sum %n {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x4x8x16xf32>) -> tensor<f32>
  %c = mnemo.sum %r {axes = array<i64: 0, 1, 2>} : (tensor<2x4x128xf32>) -> tensor<f32>
  %ab = mnemo.add %a, %b : tensor<f32>
  %abc = mnemo.add %ab, %c : tensor<f32>
  return %abc : tensor<f32>
}

// CHECK-LABEL: func.func @eval_step
// CHECK: mnemo.exp {{.*}}mnemo.placement = #mnemo.placement<offsets = {{\[}}[[E:[0-9]+]]], sizes = [4096]
// The transpose is read in place, with permuted strides.
// CHECK: mnemo.transpose {{.*}}mnemo.placement = #mnemo.placement<offsets = {{\[}}[[E]]], sizes = [4096], strided_view = true>
// neg reads the view, so it does not write over it, even though neither
// the view nor exp's result is used later.
// CHECK: mnemo.neg {{.*}}offsets = {{\[}}[[N:[0-9]+]]]
// CHECK-NOT: offsets = {{\[}}[[E]]], {{.*}}mnemo.neg
// The reshape of a strided view is a copy with its own offset.
// CHECK: mnemo.reshape {{.*}}offsets = {{\[}}[[R:[0-9]+]]]
// CHECK-NOT: mnemo.reshape {{.*}}offsets = {{\[}}[[E]]]
