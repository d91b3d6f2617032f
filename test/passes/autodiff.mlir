// The autodiff pass: the backward of a small model, gradient accumulation for
// a value used twice, the optimizer, and @eval_step.
// RUN: mnemo-opt %s --autodiff | FileCheck %s
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(autodiff,canonicalize,cse)' | FileCheck %s --check-prefix=SAME

module attributes {mnemo.train = {optimizer = {kind = "sgd", lr = 1.0e-01 : f64,
    momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false}}} {
  func.func @forward(%x: tensor<4x3xf32> {mnemo.name = "x", mnemo.role = "input"},
                     %y: tensor<4xi32> {mnemo.name = "y", mnemo.role = "target"},
                     %w: tensor<3x3xf32> {mnemo.name = "w", mnemo.role = "param", mnemo.init = {kind = "zeros"}})
      -> (tensor<f32> {mnemo.name = "loss"}, tensor<4x3xf32> {mnemo.name = "output"}) {
    // %w is used twice: its gradient is the sum of both uses'.
    %h = mnemo.matmul %x, %w : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
    %r = mnemo.tanh %h : tensor<4x3xf32>
    %o = mnemo.matmul %r, %w : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
    %l = mnemo.cross_entropy %o, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
    return %l, %o : tensor<f32>, tensor<4x3xf32>
  }
}

// CHECK-LABEL: func.func @eval_step
// CHECK: mnemo.matmul
// CHECK: %[[LOGITS:.*]] = mnemo.matmul
// CHECK: mnemo.cross_entropy %[[LOGITS]]
// CHECK: mnemo.accuracy %[[LOGITS]]
// CHECK: return {{.*}} : tensor<f32>, tensor<f32>

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[^:]*]]: tensor<3x3xf32> {{{.*}}mnemo.name = "w", mnemo.role = "param"}
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x3xf32> {{{.*}}mnemo.role = "input"}
// CHECK-SAME: %[[Y:[^:]*]]: tensor<4xi32> {{{.*}}mnemo.role = "target"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {{{.*}}mnemo.role = "step"}
// CHECK-SAME: {mnemo.name = "w", mnemo.reuses_arg = 0 : i64}
// The forward, cloned.
// CHECK: %[[H:.*]] = mnemo.matmul %[[X]], %[[W]]
// CHECK: %[[R:.*]] = mnemo.tanh %[[H]]
// CHECK: %[[O:.*]] = mnemo.matmul %[[R]], %[[W]]
// CHECK: %[[L:.*]] = mnemo.cross_entropy %[[O]], %[[Y]]
// The backward, in reverse, from d(loss) = 1.
// CHECK: %[[ONE:.*]] = mnemo.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DO:.*]] = mnemo.cross_entropy_grad %[[ONE]], %[[O]], %[[Y]]
// CHECK: %[[DR:.*]] = mnemo.matmul %[[DO]], %[[W]] {transpose_rhs = true}
// CHECK: %[[DW2:.*]] = mnemo.matmul %[[R]], %[[DO]] {transpose_lhs = true}
// tanh' = 1 - y^2
// CHECK: mnemo.mul %[[R]], %[[R]]
// CHECK: %[[DH:.*]] = mnemo.mul %[[DR]],
// CHECK: %[[DW1:.*]] = mnemo.matmul %[[X]], %[[DH]] {transpose_lhs = true}
// CHECK: %[[DW:.*]] = mnemo.add %[[DW2]], %[[DW1]]
// CHECK: %[[NORM:.*]] = mnemo.global_norm %[[DW]]
// CHECK: %[[LR:.*]] = mnemo.lr_schedule %[[STEP]]
// Plain SGD: w - lr * dw.
// CHECK: %[[LRW:.*]] = mnemo.broadcast %[[LR]]
// CHECK: %[[DELTA:.*]] = mnemo.mul %[[LRW]], %[[DW]]
// CHECK: %[[NEW:.*]] = mnemo.sub %[[W]], %[[DELTA]]
// CHECK: return %[[L]], %[[NEW]], %[[LR]], %[[NORM]]

// The forward computes the same before and after.
// SAME: @forward: 2 results agree
