// amp, category f32: reductions, exp/log, softmax, norms and losses run in
// f32 even when their input is a bf16 activation (cast up at the op).
// RUN: mnemo-opt %s --amp=precision=bf16 --cse | FileCheck %s
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(amp{precision=bf16},cse)' --rtol=3e-2 --atol=3e-2 | FileCheck %s --check-prefix=SAME
// SAME: @forward: 1 results agree

func.func @forward(%x: tensor<4x8xf32> {mnemo.role = "input", mnemo.name = "x"},
                   %y: tensor<4xi32> {mnemo.role = "target", mnemo.name = "y"},
                   %w: tensor<8x8xf32> {mnemo.role = "param", mnemo.name = "w"},
                   %g: tensor<8xf32> {mnemo.role = "param", mnemo.name = "g"})
    -> (tensor<f32> {mnemo.name = "loss"}) {
  // CHECK: %[[H:.*]] = mnemo.matmul {{.*}} -> tensor<4x8xbf16>
  %h = mnemo.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[H32:.*]] = mnemo.cast %[[H]] : tensor<4x8xbf16> -> tensor<4x8xf32>
  // CHECK: mnemo.softmax %[[H32]] {{.*}}: tensor<4x8xf32>
  // CHECK: mnemo.exp %{{.*}} : tensor<4x8xf32>
  // CHECK: mnemo.rmsnorm %{{.*}} -> tensor<4x8xf32>
  // CHECK: mnemo.log_softmax %{{.*}} : tensor<4x8xf32>
  // CHECK: mnemo.cross_entropy %{{.*}}, %arg1 : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %p = mnemo.softmax %h {axis = 1 : i64} : tensor<4x8xf32>
  %e = mnemo.exp %h : tensor<4x8xf32>
  %n = mnemo.rmsnorm %e, %g {epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = mnemo.log_softmax %n {axis = 1 : i64} : tensor<4x8xf32>
  %q0 = mnemo.add %p, %n : tensor<4x8xf32>
  %q = mnemo.add %q0, %l : tensor<4x8xf32>
  %loss = mnemo.cross_entropy %q, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
