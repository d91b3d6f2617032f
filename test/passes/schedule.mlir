// schedule: a memory-aware order that computes the same thing.
// RUN: mnemo-opt %s --schedule --plan-memory | FileCheck %s
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(schedule)' | FileCheck %s --check-prefix=SAME
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(schedule,plan-memory)' --arena | FileCheck %s --check-prefix=SAME

// Three large values, each reduced at the end: in this order all three are
// live at once; the schedule reduces each as soon as it exists.
func.func @eval_step(%x: tensor<4096xf32> {mnemo.role = "input", mnemo.name = "x"})
    -> (tensor<f32> {mnemo.name = "loss"}) {
  %a = mnemo.exp %x : tensor<4096xf32>
  %b = mnemo.tanh %x : tensor<4096xf32>
  %c = mnemo.sigmoid %x : tensor<4096xf32>
  %sa = mnemo.sum %a {axes = array<i64: 0>} : (tensor<4096xf32>) -> tensor<f32>
  %sb = mnemo.sum %b {axes = array<i64: 0>} : (tensor<4096xf32>) -> tensor<f32>
  %sc = mnemo.sum %c {axes = array<i64: 0>} : (tensor<4096xf32>) -> tensor<f32>
  %ab = mnemo.add %sa, %sb : tensor<f32>
  %abc = mnemo.add %ab, %sc : tensor<f32>
  return %abc : tensor<f32>
}

// CHECK-LABEL: func.func @eval_step
// One 16 KiB buffer at a time, plus the 256-byte scalars.
// CHECK-SAME: lower_bound_bytes = 16896
// CHECK: mnemo.exp
// CHECK-NEXT: mnemo.sum
// CHECK-NEXT: mnemo.tanh
// CHECK-NEXT: mnemo.sum
// CHECK-NEXT: mnemo.add
// CHECK-NEXT: mnemo.sigmoid
// CHECK-NEXT: mnemo.sum
// CHECK-NEXT: mnemo.add

// SAME: @eval_step: 1 results agree
