// The fuse-classifier-gradient pass: a fused classifier loss and its
// gradient become one linear_cross_entropy_with_grad at the loss's place
// where the loss's gradient exists there (@seeded: an argument, as a loss
// scale is; the step's constant seed is the usual case,
// test/reference/models/classifier-loss*.mn), with the bias and its
// gradient carried over. Where the gradient is computed after the loss
// (@late), or the log-sum-exp has another reader (@shared), the two ops
// stay. The interpreter runs @seeded before and after the pass: the same
// loss and gradients.
// RUN: mnemo-opt %s --fuse-classifier-gradient | FileCheck %s
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(fuse-classifier-gradient)' | FileCheck %s --check-prefix=SAME

module {
  // CHECK-LABEL: func.func @seeded
  func.func @seeded(%h: tensor<2x5x4xf32>, %w: tensor<7x4xf32>,
                    %y: tensor<2x5xi32>, %b: tensor<7xf32>, %g: tensor<f32>)
      -> (tensor<f32>, tensor<2x5x4xf32>, tensor<7x4xf32>, tensor<7xf32>) {
    // CHECK-NOT: mnemo.linear_cross_entropy_grad
    // CHECK: %[[LOSS:.*]], %[[DH:.*]], %[[DW:.*]], %[[DB:.*]] = mnemo.linear_cross_entropy_with_grad %arg4, %arg0, %arg1, %arg2, %arg3 {chunk_rows = 4 : i64, ignore_index = -100 : i64, label_smoothing = 1.000000e-01 : f64, transpose_weight = true}
    // CHECK-NOT: mnemo.linear_cross_entropy_grad
    // CHECK: return %[[LOSS]], %[[DH]], %[[DW]], %[[DB]]
    %loss, %lse = mnemo.linear_cross_entropy %h, %w, %y, %b {chunk_rows = 4 : i64, ignore_index = -100 : i64, label_smoothing = 0.1 : f64, transpose_weight = true}
        : (tensor<2x5x4xf32>, tensor<7x4xf32>, tensor<2x5xi32>, tensor<7xf32>) -> (tensor<f32>, tensor<2x5xf32>)
    %dh, %dw, %db = mnemo.linear_cross_entropy_grad %g, %h, %w, %y, %lse, %b {chunk_rows = 4 : i64, ignore_index = -100 : i64, label_smoothing = 0.1 : f64, transpose_weight = true}
        : (tensor<f32>, tensor<2x5x4xf32>, tensor<7x4xf32>, tensor<2x5xi32>, tensor<2x5xf32>, tensor<7xf32>) -> (tensor<2x5x4xf32>, tensor<7x4xf32>, tensor<7xf32>)
    return %loss, %dh, %dw, %db : tensor<f32>, tensor<2x5x4xf32>, tensor<7x4xf32>, tensor<7xf32>
  }

  // CHECK-LABEL: func.func @late
  // CHECK: mnemo.linear_cross_entropy %
  // CHECK: mnemo.linear_cross_entropy_grad
  func.func @late(%h: tensor<2x5x4xf32>, %w: tensor<4x7xf32>,
                  %y: tensor<2x5xi32>)
      -> (tensor<f32>, tensor<2x5x4xf32>, tensor<4x7xf32>) {
    %loss, %lse = mnemo.linear_cross_entropy %h, %w, %y {chunk_rows = 4 : i64, ignore_index = -100 : i64, label_smoothing = 0.0 : f64, transpose_weight = false}
        : (tensor<2x5x4xf32>, tensor<4x7xf32>, tensor<2x5xi32>) -> (tensor<f32>, tensor<2x5xf32>)
    %g = mnemo.exp %loss : tensor<f32>
    %dh, %dw = mnemo.linear_cross_entropy_grad %g, %h, %w, %y, %lse {chunk_rows = 4 : i64, ignore_index = -100 : i64, label_smoothing = 0.0 : f64, transpose_weight = false}
        : (tensor<f32>, tensor<2x5x4xf32>, tensor<4x7xf32>, tensor<2x5xi32>, tensor<2x5xf32>) -> (tensor<2x5x4xf32>, tensor<4x7xf32>)
    return %loss, %dh, %dw : tensor<f32>, tensor<2x5x4xf32>, tensor<4x7xf32>
  }

  // CHECK-LABEL: func.func @shared
  // CHECK: mnemo.linear_cross_entropy %
  // CHECK: mnemo.linear_cross_entropy_grad
  func.func @shared(%h: tensor<2x5x4xf32>, %w: tensor<4x7xf32>,
                    %y: tensor<2x5xi32>, %g: tensor<f32>)
      -> (tensor<f32>, tensor<2x5x4xf32>, tensor<4x7xf32>, tensor<2x5xf32>) {
    %loss, %lse = mnemo.linear_cross_entropy %h, %w, %y {chunk_rows = 4 : i64, ignore_index = -100 : i64, label_smoothing = 0.0 : f64, transpose_weight = false}
        : (tensor<2x5x4xf32>, tensor<4x7xf32>, tensor<2x5xi32>) -> (tensor<f32>, tensor<2x5xf32>)
    %dh, %dw = mnemo.linear_cross_entropy_grad %g, %h, %w, %y, %lse {chunk_rows = 4 : i64, ignore_index = -100 : i64, label_smoothing = 0.0 : f64, transpose_weight = false}
        : (tensor<f32>, tensor<2x5x4xf32>, tensor<4x7xf32>, tensor<2x5xi32>, tensor<2x5xf32>) -> (tensor<2x5x4xf32>, tensor<4x7xf32>)
    return %loss, %dh, %dw, %lse : tensor<f32>, tensor<2x5x4xf32>, tensor<4x7xf32>, tensor<2x5xf32>
  }
}
// SAME: @seeded: 4 results agree on 3 random inputs
