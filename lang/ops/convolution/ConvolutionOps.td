//===- ConvolutionOps.td - 2-D convolution ---------------*- tablegen -*-===//
//
// torch.nn.functional.conv2d (NCHW input, OIHW weight, no bias) and the two
// backward ops its gradient rule emits. Everything about them is in this
// folder: the ODS (here), the shape checks, the gradient rule, the one
// getConvGeometry() every consumer reads and the CPU workspace the kernels
// declare (ConvolutionOps.cpp), the reference interpreter's model
// (ConvolutionInterpreter.cpp), the CPU kernels (ConvolutionKernels.h and
// .cpp: im2col and sgemm) and the code both emitters write
// (ConvolutionEmission.cpp; on the GPU, cuDNN).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_CONVOLUTION_CONVOLUTIONOPS_TD
#define MNEMO_LANG_OPS_CONVOLUTION_CONVOLUTIONOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Mnemo_Conv2DOp : Mnemo_Op<"conv2d", [Mnemo_AmpLowPrecision, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let extraClassDeclaration = [{
    /// A multiply-add (2 FLOPs) per result element and weight element of
    /// one output channel.
    int64_t getRecomputeFlops() {
      auto w = ::llvm::cast<::mlir::ShapedType>(getWeight().getType()).getShape();
      return 2 * ::llvm::cast<::mlir::ShapedType>(getType()).getNumElements() *
             w[1] * w[2] * w[3];
    }
    /// The convolution in the forward's terms (ConvolutionOps.cpp).
    ::mnemo::ConvGeometry getConvGeometry();
  }];
  let summary = "2-D convolution (NCHW input, OIHW weight)";
  let description = [{
    Cross-correlation as `torch.nn.functional.conv2d` computes it, without
    bias (a bias is a broadcast add).

    ```mlir
    %y = mnemo.conv2d %x, %w {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}
        : (tensor<64x1x28x28xf32>, tensor<16x1x3x3xf32>) -> tensor<64x16x28x28xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, Mnemo_FloatTensor:$weight,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_Conv2DInputGradOp : Mnemo_Op<"conv2d_input_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure,
    DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let extraClassDeclaration = [{
    /// The convolution in the forward's terms (ConvolutionOps.cpp).
    ::mnemo::ConvGeometry getConvGeometry();
  }];
  let summary = "gradient of a 2-D convolution's input; a transposed convolution";
  let description = [{
    The transposed convolution of the output gradient with the weight; the
    result type is the forward input's. It is also the forward of
    `conv_transpose2d` (torch.nn.ConvTranspose2d, whose weight layout
    [C_in, C_out, KH, KW] is this op's [O, C, KH, KW]; output_padding is in
    the result type), so it has a gradient of its own: a convolution of
    the result's gradient for its operand, and a weight gradient with the
    roles of input and output exchanged.

    ```mlir
    %dx = mnemo.conv2d_input_grad %dy, %w {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}
        : (tensor<64x16x28x28xf32>, tensor<16x1x3x3xf32>) -> tensor<64x1x28x28xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, Mnemo_FloatTensor:$weight,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_Conv2DWeightGradOp : Mnemo_Op<"conv2d_weight_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let extraClassDeclaration = [{
    /// The convolution in the forward's terms (ConvolutionOps.cpp).
    ::mnemo::ConvGeometry getConvGeometry();
  }];
  let summary = "gradient of a 2-D convolution's weight";
  let description = [{
    ```mlir
    %dw = mnemo.conv2d_weight_grad %dy, %x {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}
        : (tensor<64x16x28x28xf32>, tensor<64x1x28x28xf32>) -> tensor<16x1x3x3xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, Mnemo_FloatTensor:$input,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // MNEMO_LANG_OPS_CONVOLUTION_CONVOLUTIONOPS_TD
