// Folds and canonicalization patterns of the mnemo dialect.
// RUN: mnemo-opt %s -canonicalize | FileCheck %s
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(canonicalize)' | FileCheck %s --check-prefix=SAME
// SAME-COUNT-10: results agree

// CHECK-LABEL: func.func @mul_by_one
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @mul_by_one(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = mnemo.constant dense<1.0> : tensor<4x8xf32>
  %0 = mnemo.mul %x, %one : tensor<4x8xf32>
  %1 = mnemo.mul %one, %0 : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @add_zero_sub_zero_div_one
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @add_zero_sub_zero_div_one(%x: tensor<4xf32>) -> tensor<4xf32> {
  %zero = mnemo.constant dense<0.0> : tensor<4xf32>
  %one = mnemo.constant dense<1.0> : tensor<4xf32>
  %0 = mnemo.add %x, %zero : tensor<4xf32>
  %1 = mnemo.add %zero, %0 : tensor<4xf32>
  %2 = mnemo.sub %1, %zero : tensor<4xf32>
  %3 = mnemo.div %2, %one : tensor<4xf32>
  return %3 : tensor<4xf32>
}

// Multiplying by two, or subtracting from zero, is not a no-op.
// CHECK-LABEL: func.func @not_identities
// CHECK: mnemo.mul
// CHECK: mnemo.sub
func.func @not_identities(%x: tensor<4xf32>) -> tensor<4xf32> {
  %two = mnemo.constant dense<2.0> : tensor<4xf32>
  %zero = mnemo.constant dense<0.0> : tensor<4xf32>
  %0 = mnemo.mul %x, %two : tensor<4xf32>
  %1 = mnemo.sub %zero, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = mnemo.transpose %[[X]] {permutation = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// CHECK-NEXT: return %[[T]]
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %0 = mnemo.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %1 = mnemo.transpose %0 {permutation = array<i64: 2, 0, 1>} : (tensor<4x2x3xf32>) -> tensor<3x4x2xf32>
  return %1 : tensor<3x4x2xf32>
}

// CHECK-LABEL: func.func @transposes_cancel
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transposes_cancel(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mnemo.transpose %x {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = mnemo.transpose %0 {permutation = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[R:.*]] = mnemo.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<24xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain(%x: tensor<2x3x4xf32>) -> tensor<24xf32> {
  %0 = mnemo.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = mnemo.reshape %0 : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %2 = mnemo.reshape %1 : (tensor<4x6xf32>) -> tensor<24xf32>
  return %2 : tensor<24xf32>
}

// CHECK-LABEL: func.func @identity_views
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_views(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mnemo.reshape %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = mnemo.broadcast %0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = mnemo.cast %1 : tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = mnemo.transpose %2 {permutation = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %3 : tensor<2x3xf32>
}

// x @ W.T reads W transposed in place: no transpose op remains.
// CHECK-LABEL: func.func @matmul_absorbs_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<8x784xf32>, %[[W:.*]]: tensor<512x784xf32>)
// CHECK-NEXT: %[[Y:.*]] = mnemo.matmul %[[X]], %[[W]] {transpose_rhs = true}
// CHECK-NEXT: return %[[Y]]
func.func @matmul_absorbs_transpose(%x: tensor<8x784xf32>, %w: tensor<512x784xf32>) -> tensor<8x512xf32> {
  %wt = mnemo.transpose %w {permutation = array<i64: 1, 0>} : (tensor<512x784xf32>) -> tensor<784x512xf32>
  %y = mnemo.matmul %x, %wt : (tensor<8x784xf32>, tensor<784x512xf32>) -> tensor<8x512xf32>
  return %y : tensor<8x512xf32>
}

// A transposed flag that is absorbed twice turns back off.
// CHECK-LABEL: func.func @matmul_flag_toggles
// CHECK-NEXT: mnemo.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8x2xf32>)
func.func @matmul_flag_toggles(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> tensor<4x2xf32> {
  %wt = mnemo.transpose %w {permutation = array<i64: 1, 0>} : (tensor<8x2xf32>) -> tensor<2x8xf32>
  %y = mnemo.matmul %x, %wt {transpose_rhs = true} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// Attention scores q @ k.T, with k still in [B, T, H, D] layout: the swap of
// the last two dimensions moves into the flag, and the rest stays a
// transpose that keeps the last dimension innermost.
// CHECK-LABEL: func.func @batch_matmul_splits_transpose
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x8x4x16xf32>)
// CHECK-NEXT: %[[KT:.*]] = mnemo.transpose %[[K]] {permutation = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: %[[S:.*]] = mnemo.batch_matmul %[[Q]], %[[KT]] {transpose_rhs = true}
// CHECK-NEXT: return %[[S]]
func.func @batch_matmul_splits_transpose(%q: tensor<2x4x8x16xf32>, %k: tensor<2x8x4x16xf32>) -> tensor<2x4x8x8xf32> {
  %kt = mnemo.transpose %k {permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x16x8xf32>
  %s = mnemo.batch_matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  return %s : tensor<2x4x8x8xf32>
}
