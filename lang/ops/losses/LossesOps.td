//===- LossesOps.td - Losses and the accuracy metric ------*- tablegen -*-===//
//
// Cross-entropy over class logits, as torch.nn.functional.cross_entropy,
// the backward op its gradient rule emits, the accuracy metric, and the
// mean squared error.
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
    over all positions of `-log_softmax(logits)[target]`, as
    `torch.nn.functional.cross_entropy` on flattened inputs.

    ```mlir
    %loss = mnemo.cross_entropy %logits, %y
        : (tensor<128x10xf32>, tensor<128xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$logits, Mnemo_IndexTensor:$targets);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

// The backward op: what the gradient rule emits (not differentiated again).

def Mnemo_CrossEntropyGradOp : Mnemo_Op<"cross_entropy_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of the mean cross-entropy";
  let description = [{
    `grad * (softmax(logits) - onehot(targets)) / positions`.

    ```mlir
    %dl = mnemo.cross_entropy_grad %one, %logits, %y
        : (tensor<f32>, tensor<128x10xf32>, tensor<128xi32>) -> tensor<128x10xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, Mnemo_FloatTensor:$logits,
                       Mnemo_IndexTensor:$targets);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

// The metric: evaluated, never differentiated.

def Mnemo_AccuracyOp : Mnemo_Op<"accuracy", [Mnemo_AmpF32, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let summary = "fraction of positions whose largest logit is the target";
  let description = [{
    Ties go to the first index, as `argmax` does.

    ```mlir
    %acc = mnemo.accuracy %logits, %y : (tensor<128x10xf32>, tensor<128xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$logits, Mnemo_IndexTensor:$targets);
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
