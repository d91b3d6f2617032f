// plan-memory: buffers, views, in-place reuse, in-place updates, offsets.
// RUN: mnemo-opt %s --autodiff --canonicalize --plan-memory | FileCheck %s

module attributes {mnemo.train = {optimizer = {kind = "adamw", lr = 1.0e-03 : f64,
    betas = [9.0e-01, 9.99e-01], eps = 1.0e-08 : f64, weight_decay = 0.0 : f64}}} {
  func.func @forward(%x: tensor<64x32xf32> {mnemo.name = "x", mnemo.role = "input"},
                     %y: tensor<2x32xi32> {mnemo.name = "y", mnemo.role = "target"},
                     %w: tensor<32x32xf32> {mnemo.name = "w", mnemo.role = "param", mnemo.init = {kind = "zeros"}},
                     %v: tensor<32x10xf32> {mnemo.name = "v", mnemo.role = "param", mnemo.init = {kind = "zeros"}})
      -> (tensor<f32> {mnemo.name = "loss"}, tensor<2x32x10xf32> {mnemo.name = "output"}) {
    %h = mnemo.matmul %x, %w : (tensor<64x32xf32>, tensor<32x32xf32>) -> tensor<64x32xf32>
    %e = mnemo.exp %h : tensor<64x32xf32>
    %t = mnemo.tanh %e : tensor<64x32xf32>
    %r = mnemo.reshape %t : (tensor<64x32xf32>) -> tensor<2x32x32xf32>
    %o = mnemo.matmul %r, %v : (tensor<2x32x32xf32>, tensor<32x10xf32>) -> tensor<2x32x10xf32>
    %l = mnemo.cross_entropy %o, %y : (tensor<2x32x10xf32>, tensor<2x32xi32>) -> tensor<f32>
    return %l, %o : tensor<f32>, tensor<2x32x10xf32>
  }
}

// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: attributes {mnemo.plan = #mnemo.step_plan<arena_bytes = {{[0-9]+}}, lower_bound_bytes = {{[0-9]+}}, naive_bytes = {{[0-9]+}}, gradient_bytes = 0, workspace_bytes = 0, cuda_workspace_bytes = {{[0-9]+}}, planner = "{{.*}}", budget_device = "cpu">}
// CHECK: %[[H:.*]] = mnemo.matmul {{.*}}mnemo.placement = #mnemo.placement<offsets = {{\[}}[[OFF:[0-9]+]]], sizes = [8192]>
// exp writes into the matmul's buffer, which dies there: the same offset.
// CHECK: mnemo.exp %[[H]] {mnemo.placement = #mnemo.placement<offsets = {{\[}}[[OFF]]], sizes = [8192]>}

// CHECK-LABEL: func.func @train_step
// The arena meets the lower bound on this small step.
// CHECK-SAME: attributes {mnemo.plan = #mnemo.step_plan<arena_bytes = [[ARENA:[0-9]+]], lower_bound_bytes = [[ARENA]], naive_bytes = {{[0-9]+}}, gradient_bytes = {{[1-9][0-9]*}},
// The forward's exp is kept for the backward (tanh' uses tanh's result, exp'
// uses exp's): no in-place reuse across a value the backward still needs.
// CHECK: %[[E:.*]] = mnemo.exp {{.*}}offsets = {{\[}}[[EOFF:[0-9]+]]]
// CHECK-NOT: offsets = {{\[}}[[EOFF]]]{{.*}}mnemo.tanh
// A reshape is a view of its input: the same offset.
// CHECK: %[[T:.*]] = mnemo.tanh %[[E]] {mnemo.placement = #mnemo.placement<offsets = {{\[}}[[TOFF:[0-9]+]]]
// CHECK: mnemo.reshape %[[T]] {mnemo.placement = #mnemo.placement<offsets = {{\[}}[[TOFF]]]
// The optimizer writes the parameter and its state in place: no arena bytes.
// CHECK: mnemo.adam_update {{.*}}mnemo.placement = #mnemo.placement<offsets = [-1, -1, -1], sizes = [0, 0, 0], aliases = [0, 2, 3]>
