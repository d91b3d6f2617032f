//===- PoolingOps.td - 2-D max and average pooling --------*- tablegen -*-===//
//
// torch.nn.MaxPool2d and AvgPool2d (NCHW) and the backward ops their
// gradient rules emit. Everything about them is in this folder: the ODS
// (here), the shape checks and gradient rules (PoolingOps.cpp), the
// reference interpreter's model (PoolingInterpreter.cpp), the CPU kernels
// (PoolingKernels.h and .cpp, f32 and 16-bit storage), the CUDA device
// functions (PoolingKernels.cuh) and the code both emitters write for them
// (PoolingEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_POOLING_POOLINGOPS_TD
#define MNEMO_LANG_OPS_POOLING_POOLINGOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Mnemo_PoolOp<string mnemonic, string what, Trait amp = Mnemo_AmpFollow>
    : Mnemo_Op<mnemonic, [amp, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let summary = "2-D " # what # " pooling (NCHW)";
  let description = [{
    The }] # what # [{ over each window. Padding counts as
    `-inf` for max pooling and as zeros for average pooling (PyTorch's
    `count_include_pad=True`).

    ```mlir
    %y = mnemo.}] # mnemonic # [{ %x {kernel = array<i64: 2, 2>,
        padding = array<i64: 0, 0>, stride = array<i64: 2, 2>}
        : (tensor<64x16x28x28xf32>) -> tensor<64x16x14x14xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The pooling's geometry as PoolingFormulas.h's PoolShape initializer
    /// lists it: {N*C, H, W, HO, WO, KH, KW, strideH, strideW, padH, padW}.
    std::array<int64_t, 11> getPoolGeometry();
  }];
}

def Mnemo_MaxPool2DOp : Mnemo_PoolOp<"max_pool2d", "maximum">;
def Mnemo_AvgPool2DOp : Mnemo_PoolOp<"avg_pool2d", "average">;

// The backward ops: gradients as gathers over the windows.

def Mnemo_MaxPool2DGradOp : Mnemo_Op<"max_pool2d_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "gradient of max pooling";
  let description = [{
    Each window's gradient goes to the first position holding its maximum,
    as PyTorch does.

    ```mlir
    %dx = mnemo.max_pool2d_grad %dy, %x {kernel = array<i64: 2, 2>,
        padding = array<i64: 0, 0>, stride = array<i64: 2, 2>}
        : (tensor<64x16x14x14xf32>, tensor<64x16x28x28xf32>) -> tensor<64x16x28x28xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, Mnemo_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The pooling's geometry as PoolingFormulas.h's PoolShape initializer
    /// lists it: {N*C, H, W, HO, WO, KH, KW, strideH, strideW, padH, padW}.
    std::array<int64_t, 11> getPoolGeometry();
  }];
}

def Mnemo_AvgPool2DGradOp : Mnemo_Op<"avg_pool2d_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient]> {
  let summary = "gradient of average pooling";
  let description = [{
    ```mlir
    %dx = mnemo.avg_pool2d_grad %dy {kernel = array<i64: 2, 2>,
        padding = array<i64: 0, 0>, stride = array<i64: 2, 2>}
        : (tensor<64x16x14x14xf32>) -> tensor<64x16x28x28xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The pooling's geometry as PoolingFormulas.h's PoolShape initializer
    /// lists it: {N*C, H, W, HO, WO, KH, KW, strideH, strideW, padH, padW}.
    std::array<int64_t, 11> getPoolGeometry();
  }];
}

#endif // MNEMO_LANG_OPS_POOLING_POOLINGOPS_TD
