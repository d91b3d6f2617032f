// Every mnemo op parses, verifies, prints, and parses again to the same IR.
// RUN: mnemo-opt %s | mnemo-opt | FileCheck %s

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: mnemo.constant dense<5.000000e-01> : tensor<4x8xf32>
  %c = mnemo.constant dense<0.5> : tensor<4x8xf32>
  // CHECK: mnemo.add %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %0 = mnemo.add %a, %b : tensor<4x8xf32>
  // CHECK: mnemo.sub
  %1 = mnemo.sub %0, %c : tensor<4x8xf32>
  // CHECK: mnemo.mul
  %2 = mnemo.mul %1, %b : tensor<4x8xf32>
  // CHECK: mnemo.div
  %3 = mnemo.div %2, %a : tensor<4x8xf32>
  // CHECK: mnemo.neg
  %4 = mnemo.neg %3 : tensor<4x8xf32>
  // CHECK: mnemo.exp
  %5 = mnemo.exp %4 : tensor<4x8xf32>
  // CHECK: mnemo.log
  %6 = mnemo.log %5 : tensor<4x8xf32>
  // CHECK: mnemo.sqrt
  %7 = mnemo.sqrt %6 : tensor<4x8xf32>
  // CHECK: mnemo.rsqrt
  %8 = mnemo.rsqrt %7 : tensor<4x8xf32>
  // CHECK: mnemo.tanh
  %9 = mnemo.tanh %8 : tensor<4x8xf32>
  // CHECK: mnemo.sigmoid
  %10 = mnemo.sigmoid %9 : tensor<4x8xf32>
  // CHECK: mnemo.relu
  %11 = mnemo.relu %10 : tensor<4x8xf32>
  // CHECK: mnemo.silu
  %12 = mnemo.silu %11 : tensor<4x8xf32>
  // CHECK: mnemo.gelu %{{.*}} {approximate = true} : tensor<4x8xf32>
  %13 = mnemo.gelu %12 {approximate = true} : tensor<4x8xf32>
  // CHECK: mnemo.gelu %{{.*}} : tensor<4x8xf32>
  %14 = mnemo.gelu %13 : tensor<4x8xf32>
  // CHECK: mnemo.pow %{{.*}} {exponent = 2.000000e+00 : f64} : tensor<4x8xf32>
  %15 = mnemo.pow %14 {exponent = 2.0 : f64} : tensor<4x8xf32>
  // CHECK: mnemo.dropout %{{.*}} {p = 1.000000e-01 : f64, seed = 7 : i64} : tensor<4x8xf32>
  %16 = mnemo.dropout %15 {p = 0.1 : f64, seed = 7 : i64} : tensor<4x8xf32>
  // CHECK: mnemo.softplus %{{.*}} : tensor<4x8xf32>
  %17 = mnemo.softplus %16 : tensor<4x8xf32>
  // CHECK: mnemo.softplus %{{.*}} {beta = 2.000000e+00 : f64, threshold = 1.000000e+01 : f64} : tensor<4x8xf32>
  %18 = mnemo.softplus %17 {beta = 2.0 : f64, threshold = 10.0 : f64} : tensor<4x8xf32>
  // CHECK: mnemo.softplus_grad %{{.*}}, %{{.*}} {beta = 2.000000e+00 : f64} : tensor<4x8xf32>
  %19 = mnemo.softplus_grad %18, %17 {beta = 2.0 : f64} : tensor<4x8xf32>
  // CHECK: mnemo.sin %{{.*}} : tensor<4x8xf32>
  %20 = mnemo.sin %19 : tensor<4x8xf32>
  // CHECK: mnemo.cos %{{.*}} : tensor<4x8xf32>
  %21 = mnemo.cos %20 : tensor<4x8xf32>
  return %21 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @logsumexp
func.func @logsumexp(%x: tensor<4x8x3xf32>) -> (tensor<4x3xf32>, tensor<4x8x1xf32>) {
  // CHECK: mnemo.logsumexp %{{.*}} {axis = 1 : i64} : (tensor<4x8x3xf32>) -> tensor<4x3xf32>
  %0 = mnemo.logsumexp %x {axis = 1 : i64} : (tensor<4x8x3xf32>) -> tensor<4x3xf32>
  // CHECK: mnemo.logsumexp %{{.*}} {axis = -1 : i64, keep_dims = true} : (tensor<4x8x3xf32>) -> tensor<4x8x1xf32>
  %1 = mnemo.logsumexp %x {axis = -1 : i64, keep_dims = true} : (tensor<4x8x3xf32>) -> tensor<4x8x1xf32>
  return %0, %1 : tensor<4x3xf32>, tensor<4x8x1xf32>
}

// CHECK-LABEL: func.func @casts_and_masks
func.func @casts_and_masks(%a: tensor<2x4x4xf32>) -> tensor<2x4x4xbf16> {
  // CHECK: mnemo.causal_mask : tensor<4x4xi1>
  %m = mnemo.causal_mask : tensor<4x4xi1>
  // CHECK: mnemo.broadcast %{{.*}} : (tensor<4x4xi1>) -> tensor<2x4x4xi1>
  %mb = mnemo.broadcast %m : (tensor<4x4xi1>) -> tensor<2x4x4xi1>
  %ninf = mnemo.constant dense<0xFF800000> : tensor<2x4x4xf32>
  // CHECK: mnemo.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x4xi1>, tensor<2x4x4xf32>
  %w = mnemo.where %mb, %a, %ninf : tensor<2x4x4xi1>, tensor<2x4x4xf32>
  // CHECK: mnemo.cast %{{.*}} : tensor<2x4x4xf32> -> tensor<2x4x4xbf16>
  %c = mnemo.cast %w : tensor<2x4x4xf32> -> tensor<2x4x4xbf16>
  // CHECK: mnemo.compare %{{.*}}, %{{.*}} {predicate = "lt"} : tensor<2x4x4xf32>, tensor<2x4x4xbf16> -> tensor<2x4x4xi1>
  %lt = mnemo.compare %w, %c {predicate = "lt"} : tensor<2x4x4xf32>, tensor<2x4x4xbf16> -> tensor<2x4x4xi1>
  // CHECK: mnemo.logical %{{.*}}, %{{.*}} {kind = "and"} : (tensor<2x4x4xi1>, tensor<2x4x4xi1>) -> tensor<2x4x4xi1>
  %both = mnemo.logical %lt, %mb {kind = "and"} : (tensor<2x4x4xi1>, tensor<2x4x4xi1>) -> tensor<2x4x4xi1>
  // CHECK: mnemo.logical %{{.*}} {kind = "not"} : (tensor<2x4x4xi1>) -> tensor<2x4x4xi1>
  %neither = mnemo.logical %both {kind = "not"} : (tensor<2x4x4xi1>) -> tensor<2x4x4xi1>
  return %c : tensor<2x4x4xbf16>
}

// CHECK-LABEL: func.func @contractions
func.func @contractions(%x: tensor<2x3x8xf32>, %w: tensor<16x8xf32>, %q: tensor<2x4x6x8xf32>,
                        %img: tensor<2x1x28x28xf32>, %k: tensor<4x1x3x3xf32>)
    -> (tensor<2x3x16xf32>, tensor<2x4x6x6xf32>, tensor<2x4x14x14xf32>, tensor<2x4x14x14xf32>) {
  // CHECK: mnemo.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %y = mnemo.matmul %x, %w {transpose_rhs = true} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  // CHECK: mnemo.batch_matmul
  %s = mnemo.batch_matmul %q, %q {transpose_rhs = true} : (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x6xf32>
  // CHECK: mnemo.conv2d %{{.*}}, %{{.*}} {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}
  %c = mnemo.conv2d %img, %k {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x28x28xf32>
  // CHECK: mnemo.max_pool2d
  %p = mnemo.max_pool2d %c {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : (tensor<2x4x28x28xf32>) -> tensor<2x4x14x14xf32>
  // CHECK: mnemo.avg_pool2d
  %a = mnemo.avg_pool2d %c {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : (tensor<2x4x28x28xf32>) -> tensor<2x4x14x14xf32>
  return %y, %s, %p, %a : tensor<2x3x16xf32>, tensor<2x4x6x6xf32>, tensor<2x4x14x14xf32>, tensor<2x4x14x14xf32>
}

// CHECK-LABEL: func.func @reductions_and_norms
func.func @reductions_and_norms(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>, %g3: tensor<3xf32>)
    -> (tensor<2x8xf32>, tensor<2x3x1xf32>, tensor<f32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  // CHECK: mnemo.sum %{{.*}} {axes = array<i64: 1>} : (tensor<2x3x8xf32>) -> tensor<2x8xf32>
  %s = mnemo.sum %x {axes = array<i64: 1>} : (tensor<2x3x8xf32>) -> tensor<2x8xf32>
  // CHECK: mnemo.mean %{{.*}} {axes = array<i64: 2>, keep_dims = true}
  %m = mnemo.mean %x {axes = array<i64: 2>, keep_dims = true} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  // CHECK: mnemo.max %{{.*}} {axes = array<i64: 0, 1, 2>}
  %mx = mnemo.max %x {axes = array<i64: 0, 1, 2>} : (tensor<2x3x8xf32>) -> tensor<f32>
  // CHECK: mnemo.softmax %{{.*}} {axis = -1 : i64} : tensor<2x3x8xf32>
  %sm = mnemo.softmax %x {axis = -1 : i64} : tensor<2x3x8xf32>
  // CHECK: mnemo.log_softmax %{{.*}} {axis = 2 : i64}
  %ls = mnemo.log_softmax %x {axis = 2 : i64} : tensor<2x3x8xf32>
  // CHECK: mnemo.layernorm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64}
  %ln = mnemo.layernorm %x, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  // CHECK: mnemo.rmsnorm %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64}
  %rn = mnemo.rmsnorm %x, %g {epsilon = 1.0e-6 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  // CHECK: mnemo.batch_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64}
  %bn, %bn_mean, %bn_var = mnemo.batch_norm %x, %g3, %g3 {epsilon = 1.0e-5 : f64} : (tensor<2x3x8xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x8xf32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK: mnemo.batch_norm_apply %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64}
  %bn_again = mnemo.batch_norm_apply %x, %g3, %g3, %bn_mean, %bn_var {epsilon = 1.0e-5 : f64} : (tensor<2x3x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x8xf32>
  // CHECK: mnemo.batch_norm_grad
  %bdx, %bdg, %bdb = mnemo.batch_norm_grad %bn, %x, %g3, %bn_mean, %bn_var {epsilon = 1.0e-5 : f64} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x8xf32>, tensor<3xf32>, tensor<3xf32>)
  return %s, %m, %mx, %sm, %ls, %ln, %rn : tensor<2x8xf32>, tensor<2x3x1xf32>, tensor<f32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// CHECK-LABEL: func.func @losses_and_data
func.func @losses_and_data(%logits: tensor<2x3x10xf32>, %t: tensor<2x3xi32>, %table: tensor<10x4xf32>)
    -> (tensor<f32>, tensor<f32>, tensor<2x3x4xf32>, tensor<6x10xf32>, tensor<3x2x10xf32>, tensor<2x3x5xf32>, tensor<2x3x20xf32>) {
  // CHECK: mnemo.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x3x10xf32>, tensor<2x3xi32>) -> tensor<f32>
  %ce = mnemo.cross_entropy %logits, %t : (tensor<2x3x10xf32>, tensor<2x3xi32>) -> tensor<f32>
  // CHECK: mnemo.mse
  %mse = mnemo.mse %logits, %logits : (tensor<2x3x10xf32>, tensor<2x3x10xf32>) -> tensor<f32>
  // CHECK: mnemo.embedding %{{.*}}, %{{.*}} : (tensor<10x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %e = mnemo.embedding %table, %t : (tensor<10x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  // CHECK: mnemo.reshape %{{.*}} : (tensor<2x3x10xf32>) -> tensor<6x10xf32>
  %r = mnemo.reshape %logits : (tensor<2x3x10xf32>) -> tensor<6x10xf32>
  // CHECK: mnemo.transpose %{{.*}} {permutation = array<i64: 1, 0, 2>}
  %tr = mnemo.transpose %logits {permutation = array<i64: 1, 0, 2>} : (tensor<2x3x10xf32>) -> tensor<3x2x10xf32>
  // CHECK: mnemo.slice %{{.*}} {axis = 2 : i64, end = 10 : i64, start = 0 : i64, step = 2 : i64}
  %sl = mnemo.slice %logits {axis = 2 : i64, start = 0 : i64, end = 10 : i64, step = 2 : i64} : (tensor<2x3x10xf32>) -> tensor<2x3x5xf32>
  // CHECK: mnemo.concat %{{.*}}, %{{.*}} {axis = 2 : i64}
  %cc = mnemo.concat %logits, %logits {axis = 2 : i64} : (tensor<2x3x10xf32>, tensor<2x3x10xf32>) -> tensor<2x3x20xf32>
  return %ce, %mse, %e, %r, %tr, %sl, %cc : tensor<f32>, tensor<f32>, tensor<2x3x4xf32>, tensor<6x10xf32>, tensor<3x2x10xf32>, tensor<2x3x5xf32>, tensor<2x3x20xf32>
}

// CHECK-LABEL: func.func @pruning
// CHECK: mnemo.prune_masks %{{.*}} : tensor<i64> weights(%{{.*}}, %{{.*}} : tensor<8x32xf32>, tensor<8xf32>) masks(%{{.*}}, %{{.*}} : tensor<8xi32>, tensor<1xi32>)
// CHECK: mnemo.apply_mask %{{.*}}, %{{.*}} when %{{.*}} : tensor<i32> : tensor<8x32xi8>, tensor<8xi32>
func.func @pruning(%step: tensor<i64>, %w: tensor<8x32xf32>, %b: tensor<8xf32>, %mw: tensor<8xi32>, %mb: tensor<1xi32>, %codes: tensor<8x32xi8>) -> (tensor<8xi32>, tensor<1xi32>, tensor<8x32xi8>) {
  %m:3 = mnemo.prune_masks %step : tensor<i64> weights(%w, %b : tensor<8x32xf32>, tensor<8xf32>) masks(%mw, %mb : tensor<8xi32>, tensor<1xi32>) {dim = 0 : i64, end = 100 : i64, every = 10 : i64, m = 4 : i64, method = "magnitude", n = 2 : i64, norm = "l2", sparsity = 5.000000e-01 : f64, start = 10 : i64} -> (tensor<8xi32>, tensor<1xi32>), tensor<i32>
  %c = mnemo.apply_mask %codes, %m#0 when %m#2 : tensor<i32> : tensor<8x32xi8>, tensor<8xi32>
  return %m#0, %m#1, %c : tensor<8xi32>, tensor<1xi32>, tensor<8x32xi8>
}
