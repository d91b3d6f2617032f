// The compress-weights pass (mnemoc --mode=inference): @train_step goes;
// @eval_step reads an int8 weight through quantize_rows + matmul_int8, a
// 2:4 weight packed, a per-layer magnitude-pruned weight in CSR sized for
// the nonzeros its final sparsity keeps (16 of 64), and an int4 weight
// read other than as x @ W^T through dequantize.
// RUN: mnemo-opt %s --compress-weights | FileCheck %s
// RUN: mnemo-opt %s --compress-weights --schedule --plan-memory | FileCheck %s --check-prefix=PLANNED

module attributes {mnemo.train = {
    quantize = [{kind = "int8", granularity = "per_channel", params = ["w1"]},
                {kind = "int4", granularity = "per_group", group = 4 : i64, params = ["w4"]}],
    prune = [{kind = "magnitude", scope = "layer", sparsity = 7.5e-01 : f64, params = ["w2"]},
             {kind = "nm", n = 2 : i64, m = 4 : i64, params = ["w3"]}]}} {
  func.func @eval_step(%x: tensor<4x16xf32> {mnemo.name = "x", mnemo.role = "input"},
                       %y: tensor<4xi32> {mnemo.name = "y", mnemo.role = "target"},
                       %w1: tensor<8x16xf32> {mnemo.name = "w1", mnemo.role = "param"},
                       %w2: tensor<8x8xf32> {mnemo.name = "w2", mnemo.role = "param"},
                       %w3: tensor<8x8xf32> {mnemo.name = "w3", mnemo.role = "param"},
                       %w4: tensor<8x8xf32> {mnemo.name = "w4", mnemo.role = "param"})
      -> (tensor<f32> {mnemo.name = "loss"}) {
    %h1 = mnemo.matmul %x, %w1 {transpose_rhs = true} : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
    %h2 = mnemo.matmul %h1, %w2 {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %h3 = mnemo.matmul %h2, %w3 {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %h4 = mnemo.matmul %h3, %w4 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = mnemo.cross_entropy %h4, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @train_step(%w: tensor<2xf32> {mnemo.name = "w", mnemo.role = "param"})
      -> (tensor<2xf32> {mnemo.name = "w", mnemo.reuses_arg = 0 : i64}) {
    return %w : tensor<2xf32>
  }
}

// CHECK-NOT: @train_step
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x16xf32>
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x16xi8> {mnemo.name = "w1", mnemo.role = "param"}
// CHECK-SAME: %[[S1:[^:]*]]: tensor<8xf32> {mnemo.name = "w1.scale", mnemo.role = "param"}
// CHECK-SAME: %[[Z1:[^:]*]]: tensor<8xi32> {mnemo.name = "w1.zero_point", mnemo.role = "param"}
// CHECK-SAME: %[[C4:[^:]*]]: tensor<32xi8> {mnemo.name = "w4", mnemo.role = "param"}
// CHECK-SAME: %[[S4:[^:]*]]: tensor<16xf32> {mnemo.name = "w4.scale", mnemo.role = "param"}
// CHECK-SAME: %[[Z4:[^:]*]]: tensor<16xi32> {mnemo.name = "w4.zero_point", mnemo.role = "param"}
// CHECK-SAME: %[[V2:[^:]*]]: tensor<16xf32> {mnemo.name = "w2.values", mnemo.role = "param"}
// CHECK-SAME: %[[C2:[^:]*]]: tensor<16xi16> {mnemo.name = "w2.columns", mnemo.role = "param"}
// CHECK-SAME: %[[O2:[^:]*]]: tensor<9xi32> {mnemo.name = "w2.row_offsets", mnemo.role = "param"}
// CHECK-SAME: %[[V3:[^:]*]]: tensor<8x4xf32> {mnemo.name = "w3", mnemo.role = "param"}
// CHECK-SAME: %[[I3:[^:]*]]: tensor<8x1xi8> {mnemo.name = "w3.indices", mnemo.role = "param"}
// CHECK-SAME: mnemo.dense_weight_bytes = 1280 : i64
// CHECK: %[[W4:.*]] = mnemo.dequantize %[[C4]], %[[S4]], %[[Z4]] {bits = 4 : i64}
// CHECK: %[[XQ:.*]], %[[XS:.*]], %[[XSUM:.*]] = mnemo.quantize_rows %[[X]]
// CHECK: %[[H1:.*]] = mnemo.matmul_int8 %[[XQ]], %[[XS]], %[[XSUM]], %[[W1]], %[[S1]], %[[Z1]]
// CHECK: %[[H2:.*]] = mnemo.matmul_csr %[[H1]], %[[V2]], %[[C2]], %[[O2]]
// CHECK: %[[H3:.*]] = mnemo.matmul_sparse24 %[[H2]], %[[V3]], %[[I3]]
// CHECK: mnemo.matmul %[[H3]], %[[W4]]

// The plan: the compressed weights' bytes in the parameters region.
// PLANNED: mnemo.name = "w1", mnemo.role = "param", mnemo.slot = #mnemo.slot<parameters, {{[0-9]+}}>
// PLANNED: mnemo.name = "w2.columns", mnemo.role = "param", mnemo.slot = #mnemo.slot<parameters, {{[0-9]+}}>
