//===- OptimizersOps.td - The optimizer's ops ---------------*- tablegen -*-===//
//
// What the optimizer pass (passes/Optimizers.cpp) appends to a training
// step: the learning-rate schedule, gradient clipping by the global norm,
// f16 loss scaling, and the updates of torch.optim.SGD, Adam(W) and
// bitsandbytes' 8-bit AdamW. None is differentiated.
// Everything about them is in this folder: the ODS (here), the checks
// (OptimizersOps.cpp), the f32 arithmetic both backends share
// (OptimizersFormulas.h), the reference interpreter's model in double
// (OptimizersInterpreter.cpp), the CPU and CUDA kernels
// (OptimizersKernels.h/.cpp, OptimizersKernels.cuh) and the code both
// emitters write, with the multi-tensor launches (OptimizersEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSOPS_TD
#define MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"


def Mnemo_LrScheduleOp : Mnemo_Op<"lr_schedule", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient]> {
  let summary = "the learning rate at a step";
  let description = [{
    `step` counts from 1. With `warmup > 0` the rate ramps linearly to
    `base_lr` over the first `warmup` steps. `kind` is `constant` (then flat)
    or `cosine` (then cosine decay to `min_lr` at step `steps`, or at
    `total_steps` when `steps` is 0).

    ```mlir
    %lr = mnemo.lr_schedule %step, %total {base_lr = 3.0e-04 : f64, kind = "cosine",
        min_lr = 0.0 : f64, steps = 0 : i64, warmup = 100 : i64}
        : (tensor<i64>, tensor<i64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$step, 0DTensorOf<[I64]>:$total_steps,
                       StrAttr:$kind, F64Attr:$base_lr, I64Attr:$warmup,
                       I64Attr:$steps, F64Attr:$min_lr);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_GlobalNormOp : Mnemo_Op<"global_norm", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let summary = "the L2 norm of several tensors taken together";
  let description = [{
    `sqrt(sum over all tensors of sum(x^2))`, accumulated in f32, as
    `torch.nn.utils.clip_grad_norm_` measures it.

    ```mlir
    %n = mnemo.global_norm %g1, %g2 : (tensor<512x784xf32>, tensor<512xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Mnemo_FloatTensor>:$inputs);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Blocks of the CUDA kernels' first pass (partial sums of squares).
    int64_t getCudaBlocks();
  }];
}

def Mnemo_LossScaleUpdateOp : Mnemo_Op<"loss_scale_update", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient]> {
  let summary = "dynamic loss scaling for f16, as torch.cuda.amp.GradScaler.update";
  let description = [{
    Given the norm of the scaled gradients, the current scale and the count
    of consecutive finite steps (an f32 holding a whole number): when the
    norm is not finite, the step is skipped (`skip` = 1), the scale halves
    (`backoff_factor`) and the count restarts; otherwise the count grows, and
    when it reaches `growth_interval` the scale doubles (`growth_factor`) and
    the count restarts. All on the device: no host synchronization.

    ```mlir
    %s2, %c2, %skip = mnemo.loss_scale_update %norm, %scale, %count
        {backoff_factor = 0.5 : f64, growth_factor = 2.0 : f64, growth_interval = 2000 : i64}
        : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>)
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$norm, 0DTensorOf<[F32]>:$scale,
                       0DTensorOf<[F32]>:$count, F64Attr:$growth_factor,
                       F64Attr:$backoff_factor, I64Attr:$growth_interval);
  let results = (outs 0DTensorOf<[F32]>:$new_scale, 0DTensorOf<[F32]>:$new_count,
                      0DTensorOf<[F32]>:$skip);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Mnemo_ClipCoefficientOp : Mnemo_Op<"clip_coefficient", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient]> {
  let summary = "the factor that clips a norm to a maximum";
  let description = [{
    `min(1, max_norm / (norm + 1e-6))`, as `clip_grad_norm_`.

    ```mlir
    %c = mnemo.clip_coefficient %n {max_norm = 1.0 : f64} : (tensor<f32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$norm, F64Attr:$max_norm);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Mnemo_SgdUpdateOp : Mnemo_Op<"sgd_update", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["param", "grad", "momentum_buffer", "new_param", "new_momentum_buffer"]>]> {
  let summary = "one SGD step, as torch.optim.SGD";
  let description = [{
    `g = grad + weight_decay * param`; with momentum, `buf = g` on step 1,
    else `buf = momentum * buf + (1 - dampening) * g`, and `g = buf` (or
    `g + momentum * buf` with Nesterov); then `param - lr * g`. Without
    momentum the buffer passes through unchanged. Written so that the
    results may reuse the operands' buffers.

    ```mlir
    %p2, %b2 = mnemo.sgd_update %p, %g, %b, %lr, %step {dampening = 0.0 : f64,
        momentum = 0.9 : f64, nesterov = false, weight_decay = 0.0 : f64}
        : (tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>, tensor<i64>)
        -> (tensor<10xf32>, tensor<10xf32>)
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$param, Mnemo_FloatTensor:$grad,
                       Mnemo_FloatTensor:$momentum_buffer,
                       0DTensorOf<[F32]>:$lr, 0DTensorOf<[I64]>:$step,
                       Optional<0DTensorOf<[F32]>>:$skip,
                       F64Attr:$momentum, F64Attr:$dampening,
                       F64Attr:$weight_decay, BoolAttr:$nesterov);
  let results = (outs Mnemo_FloatTensor:$new_param,
                      Mnemo_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Mnemo_AdamUpdateOp : Mnemo_Op<"adam_update", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "new_param",
                   "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "one Adam or AdamW step, as torch.optim.Adam / AdamW";
  let description = [{
    With `decoupled` (AdamW), `param *= 1 - lr * weight_decay` first;
    otherwise (Adam) `grad += weight_decay * param`. Then
    `m = beta1 m + (1 - beta1) g`, `v = beta2 v + (1 - beta2) g^2` and
    `param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)`,
    with PyTorch's bias correction. `step` counts from 1. With the optional
    `skip` operand nonzero (an fp16 step whose gradients overflowed), the
    parameter and the moments come out unchanged.

    ```mlir
    %p2, %m2, %v2 = mnemo.adam_update %p, %g, %m, %v, %lr, %step {beta1 = 0.9 : f64,
        beta2 = 0.999 : f64, decoupled = true, eps = 1.0e-08 : f64, weight_decay = 0.01 : f64}
        : (tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>, tensor<i64>)
        -> (tensor<10xf32>, tensor<10xf32>, tensor<10xf32>)
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$param, Mnemo_FloatTensor:$grad,
                       Mnemo_FloatTensor:$exp_avg, Mnemo_FloatTensor:$exp_avg_sq,
                       0DTensorOf<[F32]>:$lr, 0DTensorOf<[I64]>:$step,
                       Optional<0DTensorOf<[F32]>>:$skip,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay, BoolAttr:$decoupled);
  let results = (outs Mnemo_FloatTensor:$new_param, Mnemo_FloatTensor:$new_exp_avg,
                      Mnemo_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Mnemo_Adam8bitUpdateOp : Mnemo_Op<"adam8bit_update", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure,
    Mnemo_NoGradient, AllTypesMatch<["param", "grad", "new_param"]>,
    AllTypesMatch<["exp_avg_codes", "exp_avg_sq_codes", "new_exp_avg_codes",
                   "new_exp_avg_sq_codes"]>,
    AllTypesMatch<["exp_avg_absmax", "exp_avg_sq_absmax", "new_exp_avg_absmax",
                   "new_exp_avg_sq_absmax"]>]> {
  let summary = "one AdamW step with 8-bit block-wise moments (adamw8bit)";
  let description = [{
    Dettmers et al. 2021: each moment is stored as one byte per element and
    one f32 maximum per block of `block_size` elements (2048 by default;
    OptimizersKernels.h; the first moment in signed, the second in unsigned dynamic codes). The step
    dequantizes both moments, makes `adam_update`'s decoupled (AdamW)
    update in f32 with PyTorch's bias correction, and quantizes the new
    moments again, each block by its new maximum. The codes have the
    parameter's shape; the maxima are `[ceil(n / block_size)]`. With `skip`
    nonzero, everything comes out unchanged.

    ```mlir
    %p2, %mc2, %ma2, %vc2, %va2 = mnemo.adam8bit_update %p, %g, %mc, %ma, %vc, %va, %lr, %step
        {beta1 = 0.9 : f64, beta2 = 0.999 : f64, block_size = 2048 : i64, eps = 1.0e-08 : f64, weight_decay = 0.01 : f64}
        : (tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xi8>, tensor<4xf32>,
           tensor<64x128xi8>, tensor<4xf32>, tensor<f32>, tensor<i64>)
        -> (tensor<64x128xf32>, tensor<64x128xi8>, tensor<4xf32>, tensor<64x128xi8>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$param, Mnemo_FloatTensor:$grad,
                       StaticShapeTensorOf<[I8]>:$exp_avg_codes,
                       StaticShapeTensorOf<[F32]>:$exp_avg_absmax,
                       StaticShapeTensorOf<[I8]>:$exp_avg_sq_codes,
                       StaticShapeTensorOf<[F32]>:$exp_avg_sq_absmax,
                       0DTensorOf<[F32]>:$lr, 0DTensorOf<[I64]>:$step,
                       Optional<0DTensorOf<[F32]>>:$skip,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay, I64Attr:$block_size);
  let results = (outs Mnemo_FloatTensor:$new_param,
                      StaticShapeTensorOf<[I8]>:$new_exp_avg_codes,
                      StaticShapeTensorOf<[F32]>:$new_exp_avg_absmax,
                      StaticShapeTensorOf<[I8]>:$new_exp_avg_sq_codes,
                      StaticShapeTensorOf<[F32]>:$new_exp_avg_sq_absmax);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // MNEMO_LANG_OPS_OPTIMIZERS_OPTIMIZERSOPS_TD
