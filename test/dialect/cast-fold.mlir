// cast(cast(x)) folds when the inner cast widens exactly (bf16 or f16 to
// f32): back to x, or one cast. A narrowing inner cast rounds and stays.
// RUN: mnemo-opt %s --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @round_trip
// CHECK-NEXT: return %arg0 : tensor<4xbf16>
func.func @round_trip(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %a = mnemo.cast %x : tensor<4xbf16> -> tensor<4xf32>
  %b = mnemo.cast %a : tensor<4xf32> -> tensor<4xbf16>
  return %b : tensor<4xbf16>
}

// CHECK-LABEL: func.func @through_f32
// CHECK-NEXT: %[[C:.*]] = mnemo.cast %arg0 : tensor<4xf16> -> tensor<4xbf16>
// CHECK-NEXT: return %[[C]]
func.func @through_f32(%x: tensor<4xf16>) -> tensor<4xbf16> {
  %a = mnemo.cast %x : tensor<4xf16> -> tensor<4xf32>
  %b = mnemo.cast %a : tensor<4xf32> -> tensor<4xbf16>
  return %b : tensor<4xbf16>
}

// CHECK-LABEL: func.func @narrowing_stays
// CHECK-NEXT: mnemo.cast %arg0 : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT: mnemo.cast %{{.*}} : tensor<4xbf16> -> tensor<4xf32>
func.func @narrowing_stays(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = mnemo.cast %x : tensor<4xf32> -> tensor<4xbf16>
  %b = mnemo.cast %a : tensor<4xbf16> -> tensor<4xf32>
  return %b : tensor<4xf32>
}
