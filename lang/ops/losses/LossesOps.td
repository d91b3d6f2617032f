//===- LossesOps.td - Losses and the accuracy metric ------*- tablegen -*-===//
//
// Cross-entropy over class logits, as torch.nn.functional.cross_entropy,
// the backward op its gradient rule emits, the same loss fused with the
// classifier's product (linear_cross_entropy, which never holds more than
// a chunk of the logits), the accuracy metric, and the mean squared error.
// Everything about them is in this folder: the ODS (here), the shape check
// and the gradient rule (LossesOps.cpp), the per-element formulas every
// implementation evaluates (LossesFormulas.h), the reference interpreter's
// model (LossesInterpreter.cpp), the CPU and CUDA kernels (LossesKernels.h,
// LossesKernels.cuh) and the code both emitters write (LossesEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_LOSSES_LOSSESOPS_TD
#define MNEMO_LANG_OPS_LOSSES_LOSSESOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Mnemo_CrossEntropyOp : Mnemo_Op<"cross_entropy", [Mnemo_AmpF32, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let summary = "mean softmax cross-entropy with integer class targets";
  let description = [{
    `logits [..., C]` and `targets [...]` (i32 class indices) give the mean
    over the positions whose target is not `ignore_index` of
    `-log_softmax(logits)[target]`, with `label_smoothing` e mixing in the
    uniform distribution (`(1 - e) * nll + e * mean_c(-log_softmax)`), as
    `torch.nn.functional.cross_entropy` on flattened inputs. Every target
    ignored gives NaN (0 / 0), as PyTorch.

    ```mlir
    %loss = mnemo.cross_entropy %logits, %y {ignore_index = -100 : i64, label_smoothing = 0.0 : f64}
        : (tensor<128x10xf32>, tensor<128xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$logits, Mnemo_IndexTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

// The backward op: what the gradient rule emits (not differentiated again).

def Mnemo_CrossEntropyGradOp : Mnemo_Op<"cross_entropy_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["logits", "result"]>, DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let summary = "gradient of the mean cross-entropy";
  let description = [{
    `grad * (softmax(logits) - (1 - e) onehot(targets) - e / C) / counted`
    on the rows whose target is not `ignore_index` (0 on the others), with
    `counted` those rows and e the label smoothing.

    ```mlir
    %dl = mnemo.cross_entropy_grad %one, %logits, %y
        : (tensor<f32>, tensor<128x10xf32>, tensor<128xi32>) -> tensor<128x10xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, Mnemo_FloatTensor:$logits,
                       Mnemo_IndexTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

// The loss fused with the classifier's product: what passes/
// FuseLinearCrossEntropy.cpp makes of cross_entropy(h @ W^T [+ b]) (or
// h @ W [+ b]).

def Mnemo_LinearCrossEntropyOp : Mnemo_Op<"linear_cross_entropy", [Mnemo_AmpLowPrecision, Mnemo_AmpResultsStayF32,
    Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let summary = "cross-entropy of a classifier's product, in row chunks";
  let description = [{
    `cross_entropy(hidden @ weight^T + bias, targets)` (weight `[C, D]`, as
    a tied embedding table or a `Linear` stores it) or, with
    `transpose_weight = false`, `cross_entropy(hidden @ weight + bias)`
    (weight `[D, C]`), with cross_entropy's `ignore_index` and
    `label_smoothing`. The bias `[C]` is optional.
    `hidden [..., D]` is processed `chunk_rows` rows at a time: a chunk's
    logits are computed, reduced to each row's log-sum-exp and loss, and
    dropped, so no more than `[chunk_rows, C]` of the logits ever exists.
    The second result is each row's log-sum-exp, in f32 whatever the
    precision: the gradient recomputes a chunk's probabilities from it.
    The evaluation step asks for a third, `accuracy` as `mnemo.accuracy`
    computes it (the first maximum of each counted row's logits against its
    target), so that it too never holds the logits whole.

    ```mlir
    %loss, %lse = mnemo.linear_cross_entropy %h, %wte, %y {chunk_rows = 128 : i64,
        ignore_index = -100 : i64, label_smoothing = 0.0 : f64, transpose_weight = true}
        : (tensor<8x1024x768xf32>, tensor<50257x768xf32>, tensor<8x1024xi32>)
        -> (tensor<f32>, tensor<8x1024xf32>)
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$hidden, Mnemo_FloatTensor:$weight,
                       Mnemo_IndexTensor:$targets,
                       Optional<Mnemo_FloatTensor>:$bias,
                       BoolAttr:$transpose_weight,
                       I64Attr:$chunk_rows, I64Attr:$ignore_index,
                       F64Attr:$label_smoothing);
  let results = (outs 0DTensorOf<[F32]>:$result,
                      StaticShapeTensorOf<[F32]>:$log_sum_exp,
                      Optional<0DTensorOf<[F32]>>:$accuracy);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The product (2 N C D) and the row reductions.
    int64_t getRecomputeFlops();
    ::mnemo::losses::ClassifierGeometry getGeometry();
    /// Which of the CUDA kernels' scratch layouts it takes (with accuracy
    /// or without).
    ::mnemo::losses::ClassifierPass getCudaPass();
  }];
}

def Mnemo_LinearCrossEntropyGradOp : Mnemo_Op<"linear_cross_entropy_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure,
    Mnemo_NoGradient, DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let summary = "gradients of the fused classifier loss";
  let description = [{
    From the forward's operands and log-sum-exp and the loss's gradient:
    each chunk's logits are recomputed, turned into their gradient in
    place, and multiplied into the hidden states' gradient (that chunk's
    rows) and the weight's (summed over the chunks); with a bias, the
    logits' gradient summed over the rows is the bias's, a third result.

    ```mlir
    %dh, %dw = mnemo.linear_cross_entropy_grad %g, %h, %wte, %y, %lse {chunk_rows = 128 : i64,
        ignore_index = -100 : i64, label_smoothing = 0.0 : f64, transpose_weight = true}
        : (tensor<f32>, tensor<8x1024x768xf32>, tensor<50257x768xf32>, tensor<8x1024xi32>,
           tensor<8x1024xf32>) -> (tensor<8x1024x768xf32>, tensor<50257x768xf32>)
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$grad, Mnemo_FloatTensor:$hidden,
                       Mnemo_FloatTensor:$weight, Mnemo_IndexTensor:$targets,
                       StaticShapeTensorOf<[F32]>:$log_sum_exp,
                       Optional<Mnemo_FloatTensor>:$bias,
                       BoolAttr:$transpose_weight, I64Attr:$chunk_rows,
                       I64Attr:$ignore_index, F64Attr:$label_smoothing);
  let results = (outs Mnemo_FloatTensor:$hidden_grad,
                      Mnemo_FloatTensor:$weight_grad,
                      Optional<Mnemo_FloatTensor>:$bias_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The recomputed product and the two gradient products (6 N C D).
    int64_t getRecomputeFlops();
    ::mnemo::losses::ClassifierGeometry getGeometry();
  }];
}

def Mnemo_LinearCrossEntropyWithGradOp : Mnemo_Op<"linear_cross_entropy_with_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure,
    Mnemo_NoGradient, DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let summary = "the fused classifier loss and its gradients in one pass";
  let description = [{
    What passes/FuseClassifierGradient.cpp makes of a training step's
    `linear_cross_entropy` and its `linear_cross_entropy_grad` where the
    loss's gradient `grad` is known before the loss runs (the step's seed,
    as when the loss is the step's): at the loss's place, each chunk's
    logits are computed once, reduced to their rows' log-sum-exp and loss,
    and turned into their gradient in place, which the same two products
    as the backward's multiply into the hidden states' and the weight's
    gradients (Liger-Kernel's order). The backward's recomputed product is
    gone: three products of the head, as unfused, not four.

    ```mlir
    %loss, %dh, %dw = mnemo.linear_cross_entropy_with_grad %one, %h, %wte, %y {chunk_rows = 128 : i64,
        ignore_index = -100 : i64, label_smoothing = 0.0 : f64, transpose_weight = true}
        : (tensor<f32>, tensor<8x1024x768xf32>, tensor<50257x768xf32>, tensor<8x1024xi32>)
        -> (tensor<f32>, tensor<8x1024x768xf32>, tensor<50257x768xf32>)
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$grad, Mnemo_FloatTensor:$hidden,
                       Mnemo_FloatTensor:$weight, Mnemo_IndexTensor:$targets,
                       Optional<Mnemo_FloatTensor>:$bias,
                       BoolAttr:$transpose_weight, I64Attr:$chunk_rows,
                       I64Attr:$ignore_index, F64Attr:$label_smoothing);
  let results = (outs 0DTensorOf<[F32]>:$result,
                      Mnemo_FloatTensor:$hidden_grad,
                      Mnemo_FloatTensor:$weight_grad,
                      Optional<Mnemo_FloatTensor>:$bias_grad);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The product and the two gradient products (6 N C D).
    int64_t getRecomputeFlops();
    ::mnemo::losses::ClassifierGeometry getGeometry();
  }];
}

// The metric: evaluated, never differentiated.

def Mnemo_AccuracyOp : Mnemo_Op<"accuracy", [Mnemo_AmpF32, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let summary = "fraction of positions whose largest logit is the target";
  let description = [{
    Ties go to the first index, as `argmax` does. Positions whose target is
    `ignore_index` (the loss's) are not counted.

    ```mlir
    %acc = mnemo.accuracy %logits, %y : (tensor<128x10xf32>, tensor<128xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$logits, Mnemo_IndexTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Mnemo_MseOp : Mnemo_Op<"mse", [Mnemo_AmpF32, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>, AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "mean squared error";
  let description = [{
    `mean((lhs - rhs)^2)` over every element, as `torch.nn.MSELoss`.

    ```mlir
    %loss = mnemo.mse %pred, %y : (tensor<64x1xf32>, tensor<64x1xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$lhs, Mnemo_FloatTensor:$rhs);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Blocks of the CUDA kernels' first pass (partial sums of squares).
    int64_t getCudaBlocks();
  }];
}

#endif // MNEMO_LANG_OPS_LOSSES_LOSSESOPS_TD
