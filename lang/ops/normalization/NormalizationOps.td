//===- NormalizationOps.td - layernorm, rmsnorm, batch_norm *- tablegen -*-===//
//
// Normalization over the last dimension, as torch.nn.LayerNorm and
// torch.nn.RMSNorm, over all but the channels, as torch.nn.BatchNorm2d in
// training, and the backward ops their gradient rules emit.
// Everything about them is in this folder: the ODS (here), the shape checks
// and gradient rules (NormalizationOps.cpp), the per-element formulas every
// implementation evaluates (NormalizationFormulas.h), the reference
// interpreter's model (NormalizationInterpreter.cpp), the CPU and CUDA
// kernels (NormalizationKernels.h, NormalizationKernels.cuh) and the code
// both emitters write for them (NormalizationEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONOPS_TD
#define MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Mnemo_LayerNormOp : Mnemo_Op<"layernorm", [Mnemo_AmpF32, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["scale", "bias"]>]> {
  let extraClassDeclaration = [{
    /// About 5 FLOPs an element: statistics, then the normalized value.
    int64_t getRecomputeFlops() {
      return 5 * ::llvm::cast<::mlir::ShapedType>(getType()).getNumElements();
    }
  }];
  let summary = "layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * scale + bias`, with the biased
    variance, as `torch.nn.LayerNorm`.

    ```mlir
    %y = mnemo.layernorm %x, %g, %b {epsilon = 1.000000e-05 : f64}
        : (tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<16x64x128xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, Mnemo_FloatTensor:$scale,
                       Mnemo_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input `,` $scale `,` $bias attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_RmsNormOp : Mnemo_Op<"rmsnorm", [Mnemo_AmpF32, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    AllTypesMatch<["input", "result"]>]> {
  let extraClassDeclaration = [{
    /// About 5 FLOPs an element: statistics, then the normalized value.
    int64_t getRecomputeFlops() {
      return 5 * ::llvm::cast<::mlir::ShapedType>(getType()).getNumElements();
    }
  }];
  let summary = "RMS normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * scale`, as `torch.nn.RMSNorm`.

    ```mlir
    %y = mnemo.rmsnorm %x, %g {epsilon = 1.000000e-06 : f64}
        : (tensor<16x64x128xf32>, tensor<128xf32>) -> tensor<16x64x128xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, Mnemo_FloatTensor:$scale,
                       F64Attr:$epsilon);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

// (The statistics' types are checked by the verifier: a type constraint
// tying only results to each other makes mlir-tblgen's declarations and
// definitions disagree on whether the result types can be inferred.)
def Mnemo_BatchNormOp : Mnemo_Op<"batch_norm", [Mnemo_AmpFollow, Mnemo_AmpParametersStayF32,
    Mnemo_AmpStatisticsStayF32, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_FirstResultRecomputationOpInterface>,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["scale", "bias"]>]> {
  let extraClassDeclaration = [{
    /// About 7 FLOPs an element: two statistics passes, then the
    /// normalized value.
    int64_t getRecomputeFlops() {
      return 7 * ::llvm::cast<::mlir::ShapedType>(getType(0)).getNumElements();
    }
  }];
  let summary = "batch normalization over every dimension but the channels";
  let description = [{
    Training-mode batch normalization of `[N, C, ...]`, as
    `torch.nn.BatchNorm1d/2d/3d` in `train()`: each channel `c` is
    normalized by the mean and the biased variance of its `N * ...`
    elements, `(x - mean) / sqrt(var + epsilon) * scale + bias`. The
    channels' mean and biased variance are results too (f32, `[C]`): the
    running statistics are updated from them, and the gradient reads them
    instead of recomputing them (what PyTorch saves). The input and the
    output may be 16-bit beside an f32 scale and bias (mixed precision:
    the statistics are summed wider either way, as PyTorch's). Evaluation-
    mode normalization, with the running statistics, is elementwise
    arithmetic.

    ```mlir
    %y, %mean, %var = mnemo.batch_norm %x, %g, %b {epsilon = 1.000000e-05 : f64}
        : (tensor<8x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>)
        -> (tensor<8x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, Mnemo_FloatTensor:$scale,
                       Mnemo_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs Mnemo_FloatTensor:$result, Mnemo_FloatTensor:$mean,
                      Mnemo_FloatTensor:$variance);
  let assemblyFormat = "$input `,` $scale `,` $bias attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_BatchNormApplyOp : Mnemo_Op<"batch_norm_apply", [Mnemo_AmpFollow, Mnemo_AmpParametersStayF32,
    Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["scale", "bias"]>,
    AllTypesMatch<["mean", "variance"]>]> {
  let extraClassDeclaration = [{
    /// About 4 FLOPs an element: (x - mean) * rstd * scale + bias.
    static int64_t flopsFor(::mlir::ShapedType type) {
      return 4 * type.getNumElements();
    }
    int64_t getRecomputeFlops() {
      return flopsFor(::llvm::cast<::mlir::ShapedType>(getType()));
    }
  }];
  let summary = "batch_norm's output from given channel statistics";
  let description = [{
    `(x - mean) / sqrt(variance + epsilon) * scale + bias` per channel
    (dim 1), with the mean and biased variance a `batch_norm` returned: its
    output, computed again in one pass. Remat recomputes a batch norm's
    output so in the backward (the batch_norm's
    FirstResultRecomputationOpInterface), keeping only its input and
    statistics; every implementation computes the same bits as the
    batch_norm's own output. Not differentiated: only remat creates it.

    ```mlir
    %y = mnemo.batch_norm_apply %x, %g, %b, %mean, %var {epsilon = 1.000000e-05 : f64}
        : (tensor<8x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
        -> tensor<8x16x4x4xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, Mnemo_FloatTensor:$scale,
                       Mnemo_FloatTensor:$bias, Mnemo_FloatTensor:$mean,
                       Mnemo_FloatTensor:$variance, F64Attr:$epsilon);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

// The backward ops: what the gradient rules emit, so that the forward keeps
// nothing but its input alive. Neither is differentiated again.

def Mnemo_LayerNormGradOp : Mnemo_Op<"layernorm_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>,
    AllTypesMatch<["grad", "input", "input_grad"]>,
    AllTypesMatch<["scale", "scale_grad", "bias_grad"]>]> {
  let summary = "gradients of layernorm";
  let description = [{
    The gradients of a layernorm's input, scale and bias. The mean and the
    reciprocal standard deviation are recomputed from the input rather than
    saved, so the forward keeps nothing extra alive.

    ```mlir
    %dx, %dg, %db = mnemo.layernorm_grad %dy, %x, %g {epsilon = 1.000000e-05 : f64}
        : (tensor<16x64x128xf32>, tensor<16x64x128xf32>, tensor<128xf32>)
        -> (tensor<16x64x128xf32>, tensor<128xf32>, tensor<128xf32>)
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, Mnemo_FloatTensor:$input,
                       Mnemo_FloatTensor:$scale, F64Attr:$epsilon);
  let results = (outs Mnemo_FloatTensor:$input_grad, Mnemo_FloatTensor:$scale_grad,
                      Mnemo_FloatTensor:$bias_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Row chunks of the CUDA kernels' parameter-gradient column sums.
    int64_t getCudaGradChunks();
  }];
}

def Mnemo_RmsNormGradOp : Mnemo_Op<"rmsnorm_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>,
    AllTypesMatch<["grad", "input", "input_grad"]>,
    AllTypesMatch<["scale", "scale_grad"]>]> {
  let summary = "gradients of rmsnorm";
  let description = [{
    ```mlir
    %dx, %dg = mnemo.rmsnorm_grad %dy, %x, %g {epsilon = 1.000000e-06 : f64}
        : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, Mnemo_FloatTensor:$input,
                       Mnemo_FloatTensor:$scale, F64Attr:$epsilon);
  let results = (outs Mnemo_FloatTensor:$input_grad, Mnemo_FloatTensor:$scale_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Row chunks of the CUDA kernels' parameter-gradient column sums.
    int64_t getCudaGradChunks();
  }];
}

def Mnemo_BatchNormGradOp : Mnemo_Op<"batch_norm_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["grad", "input", "input_grad"]>,
    AllTypesMatch<["scale", "scale_grad", "bias_grad"]>,
    AllTypesMatch<["mean", "variance"]>]> {
  let summary = "gradients of batch_norm";
  let description = [{
    The gradients of a batch_norm's input, scale and bias, from the
    channels' mean and biased variance that the forward returned.

    ```mlir
    %dx, %dg, %db = mnemo.batch_norm_grad %dy, %x, %g, %mean, %var {epsilon = 1.000000e-05 : f64}
        : (tensor<8x16x4x4xf32>, tensor<8x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
        -> (tensor<8x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, Mnemo_FloatTensor:$input,
                       Mnemo_FloatTensor:$scale, Mnemo_FloatTensor:$mean,
                       Mnemo_FloatTensor:$variance, F64Attr:$epsilon);
  let results = (outs Mnemo_FloatTensor:$input_grad, Mnemo_FloatTensor:$scale_grad,
                      Mnemo_FloatTensor:$bias_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONOPS_TD
