//===- MnemoOps.td - The Mnemo op set ----------------------*- tablegen -*-===//
//
// The one definition of every Mnemo op. Shapes are checked by the verifiers in
// MnemoOps.cpp through lang/ShapeRules.h, which the frontend shares.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_OPS_TD
#define MNEMO_OPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Every op family's own ODS (lang/ops/*/*Ops.td), as lang/CMakeLists.txt
// lists them.
include "lang/MnemoFamilies.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Mnemo_ConstantOp : Mnemo_Op<"constant",
    [Mnemo_AmpFollow, Mnemo_FusionKernel, ConstantLike, Pure, Mnemo_NoGradient, AllTypesMatch<["value", "result"]>]> {
  let extraClassDeclaration = [{
    /// Free: known when the program is compiled.
    int64_t getRecomputeFlops() { return 0; }
  }];
  let summary = "a constant tensor";
  let description = [{
    A tensor known at compile time; in practice a splat such as the `0.5` of
    `x * 0.5`, created directly in the shape it is used at.

    ```mlir
    %half = mnemo.constant dense<5.000000e-01> : tensor<128x512xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Mnemo_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Mnemo_MatmulOp : Mnemo_Op<"matmul", [Mnemo_AmpLowPrecision, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let extraClassDeclaration = [{
    /// A multiply-add (2 FLOPs) per result element and contracted index.
    int64_t getRecomputeFlops() {
      auto lhs = ::llvm::cast<::mlir::ShapedType>(getLhs().getType()).getShape();
      return 2 * ::llvm::cast<::mlir::ShapedType>(getType()).getNumElements() *
             (getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back());
    }
  }];
  let summary = "matrix product of a (batch of rows) by a matrix";
  let description = [{
    `lhs [..., M, K]` times `rhs [K, N]` gives `[..., M, N]`; leading
    dimensions of `lhs` are rows too. `transpose_lhs` / `transpose_rhs` read
    the last two dimensions of that operand transposed, so `x @ W^T` needs no
    copy.

    ```mlir
    %y = mnemo.matmul %x, %w {transpose_rhs = true}
        : (tensor<128x784xf32>, tensor<512x784xf32>) -> tensor<128x512xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$lhs, Mnemo_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

def Mnemo_BatchMatmulOp : Mnemo_Op<"batch_matmul", [Mnemo_AmpLowPrecision, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let extraClassDeclaration = [{
    /// A multiply-add (2 FLOPs) per result element and contracted index.
    int64_t getRecomputeFlops() {
      auto lhs = ::llvm::cast<::mlir::ShapedType>(getLhs().getType()).getShape();
      return 2 * ::llvm::cast<::mlir::ShapedType>(getType()).getNumElements() *
             (getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back());
    }
  }];
  let summary = "batched matrix product";
  let description = [{
    `lhs [B..., M, K]` times `rhs [B..., K, N]` gives `[B..., M, N]`, with
    identical batch dimensions (the frontend broadcasts them first).

    ```mlir
    %att = mnemo.batch_matmul %q, %k {transpose_rhs = true}
        : (tensor<16x4x64x32xf32>, tensor<16x4x64x32xf32>) -> tensor<16x4x64x64xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$lhs, Mnemo_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

def Mnemo_ReshapeOp : Mnemo_Op<"reshape", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let extraClassDeclaration = [{
    /// Free: a view of its input.
    int64_t getRecomputeFlops() { return 0; }
  }];
  let summary = "a view with another shape and the same elements";
  let description = [{
    Row-major order is kept; element counts must agree.

    ```mlir
    %flat = mnemo.reshape %x : (tensor<128x28x28xf32>) -> tensor<128x784xf32>
    ```
  }];
  let arguments = (ins Mnemo_AnyTensor:$input);
  let results = (outs Mnemo_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Mnemo_TransposeOp : Mnemo_Op<"transpose", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let summary = "a permutation of the dimensions";
  let description = [{
    `result` dimension `i` is `input` dimension `permutation[i]`.

    ```mlir
    %t = mnemo.transpose %x {permutation = array<i64: 0, 2, 1, 3>}
        : (tensor<16x64x4x32xf32>) -> tensor<16x4x64x32xf32>
    ```
  }];
  let arguments = (ins Mnemo_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Mnemo_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizeMethod = 1;
}

def Mnemo_BroadcastOp : Mnemo_Op<"broadcast", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let summary = "numpy broadcast_to";
  let description = [{
    Aligns dimensions from the right; size-1 and missing dimensions repeat.

    ```mlir
    %b = mnemo.broadcast %bias : (tensor<512xf32>) -> tensor<128x512xf32>
    ```
  }];
  let arguments = (ins Mnemo_AnyTensor:$input);
  let results = (outs Mnemo_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Metrics and the optimizer
//===----------------------------------------------------------------------===//

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
        : (tensor<i32>, tensor<i32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$step, 0DTensorOf<[I64]>:$total_steps,
                       StrAttr:$kind, F64Attr:$base_lr, I64Attr:$warmup,
                       I64Attr:$steps, F64Attr:$min_lr);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_GlobalNormOp : Mnemo_Op<"global_norm", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient]> {
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
        : (tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>, tensor<i32>)
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
        : (tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>, tensor<i32>)
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
    runtime/Quantize8.h; the
    first moment in signed, the second in unsigned dynamic codes). The step
    dequantizes both moments, makes `adam_update`'s decoupled (AdamW)
    update in f32 with PyTorch's bias correction, and quantizes the new
    moments again, each block by its new maximum. The codes have the
    parameter's shape; the maxima are `[ceil(n / block_size)]`. With `skip`
    nonzero, everything comes out unchanged.

    ```mlir
    %p2, %mc2, %ma2, %vc2, %va2 = mnemo.adam8bit_update %p, %g, %mc, %ma, %vc, %va, %lr, %step
        {beta1 = 0.9 : f64, beta2 = 0.999 : f64, block_size = 2048 : i64, eps = 1.0e-08 : f64, weight_decay = 0.01 : f64}
        : (tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xi8>, tensor<4xf32>,
           tensor<64x128xi8>, tensor<4xf32>, tensor<f32>, tensor<i32>)
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

#endif // MNEMO_OPS_TD
