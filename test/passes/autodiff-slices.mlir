// Gradients of a value read in slices (a scan's steps, an LSTM's gates):
// when the slices tile it along one axis, their gradients are joined by one
// concat, not each placed in zeros of the whole value and summed; slices
// that overlap or leave a gap keep slice_grad and add. The interpreter runs
// the step before and after the pass on the same inputs (mnemo-difftest).
// RUN: mnemo-opt %s --autodiff | FileCheck %s
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(autodiff,canonicalize,cse)' | FileCheck %s --check-prefix=SAME

module attributes {mnemo.train = {optimizer = {kind = "sgd", lr = 1.0e-01 : f64,
    momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false}}} {
  func.func @forward(%x: tensor<4x6xf32> {mnemo.name = "x", mnemo.role = "input"},
                     %y: tensor<4xi32> {mnemo.name = "y", mnemo.role = "target"},
                     %w: tensor<4x6xf32> {mnemo.name = "w", mnemo.role = "param", mnemo.init = {kind = "zeros"}},
                     %v: tensor<4x6xf32> {mnemo.name = "v", mnemo.role = "param", mnemo.init = {kind = "zeros"}})
      -> (tensor<f32> {mnemo.name = "loss"}, tensor<4x2xf32> {mnemo.name = "output"}) {
    %a = mnemo.mul %x, %w : tensor<4x6xf32>
    // Three slices that tile %a along axis 1, read in another order.
    %s2 = mnemo.slice %a {axis = 1 : i64, start = 4 : i64, end = 6 : i64, step = 1 : i64} : (tensor<4x6xf32>) -> tensor<4x2xf32>
    %s0 = mnemo.slice %a {axis = 1 : i64, start = 0 : i64, end = 2 : i64, step = 1 : i64} : (tensor<4x6xf32>) -> tensor<4x2xf32>
    %s1 = mnemo.slice %a {axis = 1 : i64, start = 2 : i64, end = 4 : i64, step = 1 : i64} : (tensor<4x6xf32>) -> tensor<4x2xf32>
    %t0 = mnemo.tanh %s0 : tensor<4x2xf32>
    %t1 = mnemo.sigmoid %s1 : tensor<4x2xf32>
    %p = mnemo.mul %t0, %t1 : tensor<4x2xf32>
    %q = mnemo.mul %p, %s2 : tensor<4x2xf32>
    // Two slices of %b that overlap: no tiling.
    %b = mnemo.mul %x, %v : tensor<4x6xf32>
    %u0 = mnemo.slice %b {axis = 1 : i64, start = 0 : i64, end = 2 : i64, step = 1 : i64} : (tensor<4x6xf32>) -> tensor<4x2xf32>
    %u1 = mnemo.slice %b {axis = 1 : i64, start = 1 : i64, end = 3 : i64, step = 1 : i64} : (tensor<4x6xf32>) -> tensor<4x2xf32>
    %u = mnemo.mul %u0, %u1 : tensor<4x2xf32>
    %o = mnemo.add %q, %u : tensor<4x2xf32>
    %l = mnemo.cross_entropy %o, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
    return %l, %o : tensor<f32>, tensor<4x2xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// The overlapping slices of %b: each gradient placed, then added.
// CHECK: %[[G0:.*]] = mnemo.slice_grad {{.*}}start = 1 : i64
// CHECK: %[[G1:.*]] = mnemo.slice_grad {{.*}}start = 0 : i64
// CHECK: mnemo.add %[[G1]], %[[G0]]
// The tiling slices of %a: one concat, in axis order.
// CHECK-NOT: mnemo.slice_grad
// CHECK: mnemo.concat {{.*}} {axis = 1 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x6xf32>
// CHECK-NOT: mnemo.slice_grad
// CHECK: return

// SAME: @forward: 2 results agree
