// amp: autocast-style mixed precision on @forward, one category at a time.
// RUN: mnemo-opt %s --amp=precision=bf16 --cse | FileCheck %s
// f16 the same way; f32 changes nothing.
// RUN: mnemo-opt %s --amp=precision=f16 --cse | FileCheck %s --check-prefix=F16
// RUN: mnemo-opt %s --amp=precision=f32 | FileCheck %s --check-prefix=F32
// The converted forward computes what the f32 one does, to bf16's precision.
// RUN: mnemo-difftest %s --pass-pipeline='builtin.module(amp{precision=bf16},cse)' --rtol=3e-2 --atol=3e-2 | FileCheck %s --check-prefix=SAME
// SAME: @forward: 2 results agree

func.func @forward(%x: tensor<8x16xf32> {mnemo.role = "input", mnemo.name = "x"},
                   %y: tensor<8xi32> {mnemo.role = "target", mnemo.name = "y"},
                   %w1: tensor<16x32xf32> {mnemo.role = "param", mnemo.name = "fc1.weight"},
                   %b1: tensor<32xf32> {mnemo.role = "param", mnemo.name = "fc1.bias"},
                   %w2: tensor<32x16xf32> {mnemo.role = "param", mnemo.name = "fc2.weight"},
                   %g: tensor<16xf32> {mnemo.role = "param", mnemo.name = "ln.scale"},
                   %beta: tensor<16xf32> {mnemo.role = "param", mnemo.name = "ln.bias"})
    -> (tensor<f32> {mnemo.name = "loss"}, tensor<8x16xf32> {mnemo.name = "output"}) {
  // Low: the product runs in bf16; the activation and the weight are cast.
  // CHECK: %[[X:.*]] = mnemo.cast %arg0 : tensor<8x16xf32> -> tensor<8x16xbf16>
  // CHECK: %[[W:.*]] = mnemo.cast %arg2 : tensor<16x32xf32> -> tensor<16x32xbf16>
  // CHECK: %[[H:.*]] = mnemo.matmul %[[X]], %[[W]] : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %h = mnemo.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  // Follow: the bias (a parameter) follows the bf16 activation, as does the
  // activation function.
  // CHECK: %[[BB:.*]] = mnemo.broadcast %arg3 : (tensor<32xf32>) -> tensor<8x32xf32>
  // CHECK: %[[BB16:.*]] = mnemo.cast %[[BB]] : tensor<8x32xf32> -> tensor<8x32xbf16>
  // CHECK: %[[A:.*]] = mnemo.add %[[H]], %[[BB16]] : tensor<8x32xbf16>
  // CHECK: %[[G:.*]] = mnemo.gelu %[[A]] {{.*}}: tensor<8x32xbf16>
  %bb = mnemo.broadcast %b1 : (tensor<32xf32>) -> tensor<8x32xf32>
  %a = mnemo.add %h, %bb : tensor<8x32xf32>
  %ga = mnemo.gelu %a {approximate = true} : tensor<8x32xf32>
  // CHECK: %[[O:.*]] = mnemo.matmul %[[G]], %{{.*}} : (tensor<8x32xbf16>, tensor<32x16xbf16>) -> tensor<8x16xbf16>
  %o = mnemo.matmul %ga, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  // Follow, promoting: the residual adds a bf16 activation to an f32 one:
  // f32.
  // CHECK: %[[O32:.*]] = mnemo.cast %[[O]] : tensor<8x16xbf16> -> tensor<8x16xf32>
  // CHECK: %[[R:.*]] = mnemo.add %arg0, %[[O32]] : tensor<8x16xf32>
  %r = mnemo.add %x, %o : tensor<8x16xf32>
  // Category f32 (norms, softmax-likes, reductions, losses) stays f32.
  // CHECK: %[[N:.*]] = mnemo.layernorm %[[R]], %arg5, %arg6 {{.*}} -> tensor<8x16xf32>
  // CHECK: mnemo.cross_entropy %[[N]], %arg1 : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  %n = mnemo.layernorm %r, %g, %beta {epsilon = 1.0e-5 : f64} : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %loss = mnemo.cross_entropy %n, %y : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss, %n : tensor<f32>, tensor<8x16xf32>
}

// F16: mnemo.matmul %{{.*}}, %{{.*}} : (tensor<8x16xf16>, tensor<16x32xf16>) -> tensor<8x32xf16>
// F32-NOT: mnemo.cast
