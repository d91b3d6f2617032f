// amp, category low: products and convolutions run in bf16. A weight used
// twice is cast once (the cast CSE leaves is shared, as the backward will
// share it); inputs and the f32 activations are cast at the op.
// RUN: mnemo-opt %s --amp=precision=bf16 --cse | FileCheck %s
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(amp{precision=bf16},cse)' --rtol=3e-2 --atol=3e-2 | FileCheck %s --check-prefix=SAME
// SAME: @forward: 1 results agree

func.func @forward(%x: tensor<2x3x8x8xf32> {mnemo.role = "input", mnemo.name = "x"},
                   %k: tensor<4x3x3x3xf32> {mnemo.role = "param", mnemo.name = "conv.weight"},
                   %w: tensor<8x8xf32> {mnemo.role = "param", mnemo.name = "w"})
    -> (tensor<f32> {mnemo.name = "loss"}) {
  // CHECK-DAG: %[[K:.*]] = mnemo.cast %arg1 : tensor<4x3x3x3xf32> -> tensor<4x3x3x3xbf16>
  // CHECK-DAG: %[[X:.*]] = mnemo.cast %arg0 : tensor<2x3x8x8xf32> -> tensor<2x3x8x8xbf16>
  // CHECK: mnemo.conv2d %[[X]], %[[K]] {{.*}} -> tensor<2x4x8x8xbf16>
  %c = mnemo.conv2d %x, %k {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: mnemo.batch_matmul %{{.*}}, %{{.*}} : (tensor<2x4x8x8xbf16>, tensor<2x4x8x8xbf16>) -> tensor<2x4x8x8xbf16>
  // One cast of %w for both products.
  // CHECK: %[[W:.*]] = mnemo.cast %arg2 : tensor<8x8xf32> -> tensor<8x8xbf16>
  // CHECK-NOT: mnemo.cast %arg2
  // CHECK: mnemo.matmul %{{.*}}, %[[W]] {{.*}}-> tensor<64x8xbf16>
  // CHECK: mnemo.matmul %{{.*}}, %[[W]] {{.*}}-> tensor<64x8xbf16>
  // The reduction (category f32) casts the product up.
  // CHECK: mnemo.sum %{{.*}} : (tensor<64x8xf32>) -> tensor<f32>
  %wb = mnemo.broadcast %w : (tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %b = mnemo.batch_matmul %c, %wb : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %r = mnemo.reshape %b : (tensor<2x4x8x8xf32>) -> tensor<64x8xf32>
  %m1 = mnemo.matmul %r, %w : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
  %m2 = mnemo.matmul %m1, %w : (tensor<64x8xf32>, tensor<8x8xf32>) -> tensor<64x8xf32>
  %s = mnemo.sum %m2 {axes = array<i64: 0, 1>} : (tensor<64x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
