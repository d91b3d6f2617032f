// amp: a product of weights alone (an RNN's first step multiplies its
// constant initial state by the recurrent weight) runs in bf16, and what
// reads it is typed as any op is: the bias added to it meets a bf16 value
// and an f32 one, and the add computes in the wider f32. (It was left
// alone, an add of bf16 and f32 that failed the verifier: std's GRU under
// --precision=bf16.)
// RUN: mnemo-opt %s --amp=precision=bf16 --cse | FileCheck %s
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(amp{precision=bf16},cse)' --rtol=3e-2 --atol=3e-2 | FileCheck %s --check-prefix=SAME
// SAME: @forward: 1 results agree

func.func @forward(%x: tensor<4x8xf32> {mnemo.role = "input", mnemo.name = "x"},
                   %w: tensor<8x8xf32> {mnemo.role = "param", mnemo.name = "weight_hh"},
                   %b: tensor<8xf32> {mnemo.role = "param", mnemo.name = "bias_hh"})
    -> (tensor<f32> {mnemo.name = "loss"}) {
  // CHECK: %[[H0:.*]] = mnemo.constant {{.*}} : tensor<4x8xf32>
  // CHECK-DAG: %[[H16:.*]] = mnemo.cast %[[H0]] : tensor<4x8xf32> -> tensor<4x8xbf16>
  // CHECK-DAG: %[[W16:.*]] = mnemo.cast %arg1 : tensor<8x8xf32> -> tensor<8x8xbf16>
  // CHECK: %[[P:.*]] = mnemo.matmul %[[H16]], %[[W16]] {{.*}}-> tensor<4x8xbf16>
  // CHECK: %[[B:.*]] = mnemo.broadcast %arg2 : (tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[P32:.*]] = mnemo.cast %[[P]] : tensor<4x8xbf16> -> tensor<4x8xf32>
  // CHECK: %[[G:.*]] = mnemo.add %[[P32]], %[[B]] : tensor<4x8xf32>
  %h0 = mnemo.constant dense<0.5> : tensor<4x8xf32>
  %p = mnemo.matmul %h0, %w {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %bb = mnemo.broadcast %b : (tensor<8xf32>) -> tensor<4x8xf32>
  %g = mnemo.add %p, %bb : tensor<4x8xf32>
  // The activation meets the gates in bf16.
  // CHECK: mnemo.add %{{.*}}, %{{.*}} : tensor<4x8xbf16>
  %xw = mnemo.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = mnemo.add %xw, %g : tensor<4x8xf32>
  %t = mnemo.tanh %s : tensor<4x8xf32>
  %l = mnemo.sum %t {axes = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
