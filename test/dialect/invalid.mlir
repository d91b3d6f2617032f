// Verifiers reject ill-shaped and ill-typed ops with the shape rules'
// own words.
// RUN: mnemo-opt %s -split-input-file -verify-diagnostics

func.func @matmul_inner(%a: tensor<128x784xf32>, %b: tensor<512x10xf32>) {
  // expected-error @+1 {{'mnemo.matmul' op inner dimensions 784 and 512 differ}}
  %0 = mnemo.matmul %a, %b : (tensor<128x784xf32>, tensor<512x10xf32>) -> tensor<128x10xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error @+1 {{'mnemo.matmul' op result shape [4,3] should be [4,2]}}
  %0 = mnemo.matmul %a, %b : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @matmul_dtypes(%a: tensor<4x8xf32>, %b: tensor<8x2xbf16>) {
  // expected-error @+1 {{operands must share one element type, not 'f32' and 'bf16'}}
  %0 = mnemo.matmul %a, %b : (tensor<4x8xf32>, tensor<8x2xbf16>) -> tensor<4x2xf32>
  return
}

// -----

func.func @batch_matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x2xf32>) {
  // expected-error @+1 {{batch dimensions 2 and 3 (axis 0) differ}}
  %0 = mnemo.batch_matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x2xf32>) -> tensor<2x4x2xf32>
  return
}

// -----

func.func @add_types(%a: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{'mnemo.add' op requires the same type for all operands and results}}
  %0 = "mnemo.add"(%a, %b) : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @dynamic_shape(%a: tensor<?xf32>) {
  // expected-error @+1 {{must be statically shaped tensor}}
  %0 = mnemo.relu %a : tensor<?xf32>
  return
}

// -----

func.func @int_exp(%a: tensor<4xi32>) {
  // expected-error @+1 {{must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values}}
  %0 = mnemo.exp %a : tensor<4xi32>
  return
}

// -----

func.func @reduce_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = mnemo.sum %a {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [2] should be [3]}}
  %0 = mnemo.mean %a {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 5 is out of range for rank 2}}
  %0 = mnemo.softmax %a {axis = 5 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @logsumexp_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis -3 is out of range for rank 2}}
  %0 = mnemo.logsumexp %a {axis = -3 : i64} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @logsumexp_shape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [3] should be [2]}}
  %0 = mnemo.logsumexp %a {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @layernorm_scale(%a: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{the scale must be [8], not [4]}}
  %0 = mnemo.layernorm %a, %g, %g {epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @batch_norm_channels(%a: tensor<2x8x4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{the per-channel tensors must be [8], not [4]}}
  %0, %1, %2 = mnemo.batch_norm %a, %g, %g {epsilon = 1.0e-5 : f64} : (tensor<2x8x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x8x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @batch_norm_apply_statistics(%a: tensor<2x8x4xbf16>, %g: tensor<8xbf16>) {
  // expected-error@+1 {{the channels' statistics must be f32, not 'tensor<8xbf16>'}}
  %0 = mnemo.batch_norm_apply %a, %g, %g, %g, %g {epsilon = 1.0e-5 : f64} : (tensor<2x8x4xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8x4xbf16>
  return
}

// -----

func.func @rmsnorm_scale(%a: tensor<2x8xf32>, %g: tensor<2x8xf32>) {
  // expected-error @+1 {{the scale must be [8], not [2,8]}}
  %0 = mnemo.rmsnorm %a, %g {epsilon = 1.0e-6 : f64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @cross_entropy_targets(%l: tensor<4x10xf32>, %t: tensor<5xi32>) {
  // expected-error @+1 {{targets [5] must match the logits without their class dimension, [4]}}
  %0 = mnemo.cross_entropy %l, %t : (tensor<4x10xf32>, tensor<5xi32>) -> tensor<f32>
  return
}

// -----

func.func @mse_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{result shape [4] should be []}}
  %0 = mnemo.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @embedding_table(%t: tensor<10xf32>, %i: tensor<3xi32>) {
  // expected-error @+1 {{the table must be [V,D], not rank 1}}
  %0 = mnemo.embedding %t, %i : (tensor<10xf32>, tensor<3xi32>) -> tensor<3xf32>
  return
}

// -----

func.func @embedding_float_indices(%t: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{must be statically shaped tensor of 32-bit signless integer or 8-bit signless integer values}}
  %0 = mnemo.embedding %t, %i : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @reshape_count(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{6 elements cannot become 8}}
  %0 = mnemo.reshape %a : (tensor<2x3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @transpose_perm(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{the permutation is not a permutation of 0..1}}
  %0 = mnemo.transpose %a {permutation = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @broadcast_bad(%a: tensor<3xf32>) {
  // expected-error @+1 {{dimension 3 does not broadcast to 4}}
  %0 = mnemo.broadcast %a : (tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_bounds(%a: tensor<10xf32>) {
  // expected-error @+1 {{needs 0 <= start < end <= 10, not 4:12}}
  %0 = mnemo.slice %a {axis = 0 : i64, start = 4 : i64, end = 12 : i64, step = 1 : i64} : (tensor<10xf32>) -> tensor<6xf32>
  return
}

// -----

func.func @concat_mismatch(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{operand 1 has shape [3,3], which differs from [2,3] off axis 1}}
  %0 = mnemo.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<8x4x3x3xf32>) {
  // expected-error @+1 {{the input has 3 channels but the weight expects 4}}
  %0 = mnemo.conv2d %x, %w {padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  return
}

// -----

func.func @pool_window(%x: tensor<1x1x2x2xf32>) {
  // expected-error @+1 {{the window is larger than the padded input}}
  %0 = mnemo.max_pool2d %x {kernel = array<i64: 3, 3>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

func.func @dropout_p(%x: tensor<4xf32>) {
  // expected-error @+1 {{p must be in [0, 1), not 1.5}}
  %0 = mnemo.dropout %x {p = 1.5 : f64, seed = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @cast_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{a cast cannot change the shape}}
  %0 = mnemo.cast %x : tensor<4xf32> -> tensor<5xbf16>
  return
}

// -----

func.func @where_shape(%m: tensor<3xi1>, %x: tensor<4xf32>) {
  // expected-error @+1 {{condition shape [3] differs from the value shape [4]}}
  %0 = mnemo.where %m, %x, %x : tensor<3xi1>, tensor<4xf32>
  return
}

// -----

func.func @causal_rank() {
  // expected-error @+1 {{the mask must have rank 2}}
  %0 = mnemo.causal_mask : tensor<4xi1>
  return
}

// -----

func.func @constant_type() {
  // expected-error @+1 {{failed to verify that all of {value, result} have same type}}
  %0 = "mnemo.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<5xf32>
  return
}

// -----

func.func @prune_mask_words(%step: tensor<i64>, %w: tensor<64x64xf32>, %m: tensor<64xi32>) {
  // expected-error @+1 {{'mnemo.prune_masks' op a mask of 4096 elements must have 128 i32 words, not 64}}
  %0:2 = mnemo.prune_masks %step : tensor<i64> weights(%w : tensor<64x64xf32>) masks(%m : tensor<64xi32>) {dim = 0 : i64, end = 0 : i64, every = 100 : i64, m = 4 : i64, method = "magnitude", n = 2 : i64, norm = "l2", sparsity = 5.000000e-01 : f64, start = 0 : i64} -> (tensor<64xi32>), tensor<i32>
  return
}

// -----

func.func @prune_nm_rows(%step: tensor<i64>, %w: tensor<4x6xf32>, %m: tensor<1xi32>) {
  // expected-error @+1 {{'mnemo.prune_masks' op N:M groups of 4 must divide each row of 'tensor<4x6xf32>'}}
  %0:2 = mnemo.prune_masks %step : tensor<i64> weights(%w : tensor<4x6xf32>) masks(%m : tensor<1xi32>) {dim = 0 : i64, end = 0 : i64, every = 100 : i64, m = 4 : i64, method = "nm", n = 2 : i64, norm = "l2", sparsity = 0.0 : f64, start = 0 : i64} -> (tensor<1xi32>), tensor<i32>
  return
}

// -----

func.func @apply_mask_words(%x: tensor<100xf32>, %m: tensor<3xi32>) {
  // expected-error @+1 {{'mnemo.apply_mask' op a mask of 100 elements must have 4 i32 words, not 3}}
  %0 = mnemo.apply_mask %x, %m : tensor<100xf32>, tensor<3xi32>
  return
}

// -----

func.func @compare_predicate(%a: tensor<4xf32>) {
  // expected-error @+1 {{'mnemo.compare' op predicate must be one of eq ne lt le gt ge, not 'less'}}
  %0 = mnemo.compare %a, %a {predicate = "less"} : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>
  return
}

// -----

func.func @compare_types(%a: tensor<4xf32>, %b: tensor<4xi32>) {
  // expected-error @+1 {{'mnemo.compare' op cannot compare 'f32' with 'i32'}}
  %0 = mnemo.compare %a, %b {predicate = "eq"} : tensor<4xf32>, tensor<4xi32> -> tensor<4xi1>
  return
}

// -----

func.func @logical_arity(%a: tensor<4xi1>) {
  // expected-error @+1 {{'mnemo.logical' op 'and' takes 2 masks}}
  %0 = mnemo.logical %a {kind = "and"} : (tensor<4xi1>) -> tensor<4xi1>
  return
}
