// amp, batch_norm: it follows its input alone (AmpParametersStayF32), as
// PyTorch's autocast leaves it: bf16 data from the convolution in and out,
// the scale and bias read as the f32 parameters they are (no casts), the
// channels' mean and variance f32 (AmpStatisticsStayF32). An f32 input
// keeps it in f32; the --amp-policy's f32 category casts the input up.
// RUN: mnemo-opt %s --amp=precision=bf16 --cse | FileCheck %s
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(amp{precision=bf16},cse)' --rtol=3e-2 --atol=3e-2 | FileCheck %s --check-prefix=SAME
// RUN: echo '{"f32": ["batch_norm"]}' > %t.json
// RUN: mnemo-opt %s --amp="precision=bf16 policy=%t.json" --cse | FileCheck %s --check-prefix=POLICY
// SAME: @forward: 3 results agree

func.func @forward(%x: tensor<2x3x4x4xf32> {mnemo.role = "input", mnemo.name = "x"},
                   %w: tensor<4x3x1x1xf32> {mnemo.role = "param", mnemo.name = "conv.weight"},
                   %g: tensor<4xf32> {mnemo.role = "param", mnemo.name = "bn.weight"},
                   %b: tensor<4xf32> {mnemo.role = "param", mnemo.name = "bn.bias"},
                   %g3: tensor<3xf32> {mnemo.role = "param", mnemo.name = "bn0.weight"},
                   %b3: tensor<3xf32> {mnemo.role = "param", mnemo.name = "bn0.bias"})
    -> (tensor<2x4x4x4xf32> {mnemo.name = "output"}, tensor<4xf32> {mnemo.name = "mean"},
        tensor<3xf32> {mnemo.name = "input_mean"}) {
  // CHECK: %[[C:.*]] = mnemo.conv2d {{.*}} -> tensor<2x4x4x4xbf16>
  // CHECK-NOT: mnemo.cast
  // CHECK: %{{.*}}, %[[M:.*]], %{{.*}} = mnemo.batch_norm %[[C]], %arg2, %arg3 {{.*}} : (tensor<2x4x4x4xbf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xbf16>, tensor<4xf32>, tensor<4xf32>)
  // POLICY: %[[C:.*]] = mnemo.conv2d {{.*}} -> tensor<2x4x4x4xbf16>
  // POLICY: %[[C32:.*]] = mnemo.cast %[[C]] : tensor<2x4x4x4xbf16> -> tensor<2x4x4x4xf32>
  // POLICY: mnemo.batch_norm %[[C32]], %arg2, %arg3 {{.*}} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %c = mnemo.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>} : (tensor<2x3x4x4xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x4x4xf32>
  %y, %mean, %var = mnemo.batch_norm %c, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: mnemo.relu %{{.*}} : tensor<2x4x4x4xbf16>
  %r = mnemo.relu %y : tensor<2x4x4x4xf32>
  // The input itself, f32, normalized in f32.
  // CHECK: mnemo.batch_norm %arg0, %arg4, %arg5 {{.*}} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>,
  %y2, %mean2, %var2 = mnemo.batch_norm %x, %g3, %b3 {epsilon = 1.0e-5 : f64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return %r, %mean, %mean2 : tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<3xf32>
}
