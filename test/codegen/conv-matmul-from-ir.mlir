// The emitters from IR, for the convolution, pooling, embedding and matmul
// families: where each kernel reads and writes is the plan's (captured),
// and the CPU backend hands GEMMs to BLAS.
// RUN: mnemo-opt %s --pass-pipeline='builtin.module(schedule,fuse-elementwise,plan-memory)' -o %t.mlir
// RUN: mnemo-translate --mnemo-to-cpp %t.mlir | FileCheck %s --check-prefix=CPU
// RUN: mnemo-translate --mnemo-to-cuda-kernels %t.mlir | FileCheck %s --check-prefix=KERNELS

module attributes {mnemo.model = "ConvNet"} {
  func.func @eval_step(%img: tensor<2x1x8x8xf32> {mnemo.name = "image", mnemo.role = "input"},
                       %y: tensor<2xi32> {mnemo.name = "label", mnemo.role = "target"},
                       %k: tensor<4x1x3x3xf32> {mnemo.name = "conv.weight", mnemo.role = "param"},
                       %w: tensor<3x64xf32> {mnemo.name = "fc.weight", mnemo.role = "param"})
      -> (tensor<f32> {mnemo.name = "loss"}, tensor<f32> {mnemo.name = "accuracy"}) {
    %c = mnemo.conv2d %img, %k {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}
        : (tensor<2x1x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32>
    %r = mnemo.relu %c : tensor<2x4x8x8xf32>
    %p = mnemo.max_pool2d %r {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>}
        : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
    %f = mnemo.reshape %p : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32>
    %o = mnemo.matmul %f, %w {transpose_rhs = true} : (tensor<2x64xf32>, tensor<3x64xf32>) -> tensor<2x3xf32>
    %l = mnemo.cross_entropy %o, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    %a = mnemo.accuracy %o, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    return %l, %a : tensor<f32>, tensor<f32>
  }
}

// Each kernel reads where its producer wrote; the GEMM reads the pooled,
// reshaped view (no copy) and the weight in the parameters.
// The convolution is a site set up before the first step (oneDNN's
// primitive where the trainer has oneDNN) with the op's planned workspace.
// CPU: ConvSite [[SITE:site[0-9]+]](ConvShape{2, 1, 8, 8, 4, 3, 3, 8, 8, 1, 1, 1, 1, 2}, ConvKind::Forward, {{[0-9]+}});
// CPU: mnemo.conv2d
// CPU: [[SITE]].run(f32(I + 0), f32(P + 0), f32(A + [[CONV:[0-9]+]]), f32(W));
// CPU: mnemo.relu
// CPU: loop{{[0-9]+}}(f32(A + [[CONV]]), f32(A + [[RELU:[0-9]+]]));
// CPU: mnemo.max_pool2d
// CPU: maxPool2d(pool, f32(A + [[RELU]]), f32(A + [[POOL:[0-9]+]]));
// CPU: mnemo.matmul
// CPU: gemm(false, true, 2, 3, 64, 1.0f, f32(A + [[POOL]]), 64, f32(P + 256), 64, 0.0f, f32(A + [[OUT:[0-9]+]]), 3);
// CPU: crossEntropy(f32(A + [[OUT]]), i32(I + 512), 2, 3,

// KERNELS: eval_step_k0(const Regions r)
