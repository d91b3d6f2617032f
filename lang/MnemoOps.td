//===- MnemoOps.td - The Mnemo op set ----------------------*- tablegen -*-===//
//
// The one definition of every Mnemo op. Shapes are checked by the verifiers in
// MnemoOps.cpp through lang/ShapeRules.h, which the frontend shares.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_OPS_TD
#define MNEMO_OPS_TD

include "lang/MnemoDialect.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Mnemo_ConstantOp : Mnemo_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
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
// Elementwise arithmetic
//===----------------------------------------------------------------------===//

class Mnemo_BinaryOp<string mnemonic, string what>
    : Mnemo_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise " # what;
  let description = [{
    Elementwise }] # what # [{ of two tensors of one type.
    Broadcasting is explicit: the frontend inserts `mnemo.broadcast`.

    ```mlir
    %z = mnemo.}] # mnemonic # [{ %x, %y : tensor<128x512xf32>
    ```
  }];
  let arguments = (ins Mnemo_NumericTensor:$lhs, Mnemo_NumericTensor:$rhs);
  let results = (outs Mnemo_NumericTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Mnemo_AddOp : Mnemo_BinaryOp<"add", "addition"> { let hasFolder = 1; }
def Mnemo_SubOp : Mnemo_BinaryOp<"sub", "subtraction"> { let hasFolder = 1; }
def Mnemo_MulOp : Mnemo_BinaryOp<"mul", "multiplication"> { let hasFolder = 1; }
def Mnemo_DivOp : Mnemo_BinaryOp<"div", "division"> { let hasFolder = 1; }

class Mnemo_UnaryOp<string mnemonic, string what>
    : Mnemo_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise " # what;
  let description = [{
    Computes }] # what # [{ of every element.

    ```mlir
    %y = mnemo.}] # mnemonic # [{ %x : tensor<128x512xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Mnemo_NegOp : Mnemo_UnaryOp<"neg", "the negation">;
def Mnemo_ExpOp : Mnemo_UnaryOp<"exp", "e to the power">;
def Mnemo_LogOp : Mnemo_UnaryOp<"log", "the natural logarithm">;
def Mnemo_SqrtOp : Mnemo_UnaryOp<"sqrt", "the square root">;
def Mnemo_RsqrtOp : Mnemo_UnaryOp<"rsqrt", "the reciprocal square root">;
def Mnemo_TanhOp : Mnemo_UnaryOp<"tanh", "the hyperbolic tangent">;
def Mnemo_SigmoidOp : Mnemo_UnaryOp<"sigmoid", "the logistic sigmoid">;
def Mnemo_ReluOp : Mnemo_UnaryOp<"relu", "max(x, 0)">;
def Mnemo_SiluOp : Mnemo_UnaryOp<"silu", "x * sigmoid(x)">;

def Mnemo_GeluOp : Mnemo_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise GELU";
  let description = [{
    `x * Phi(x)` with the exact normal CDF, or with PyTorch's tanh
    approximation when `approximate` is set (GPT-2 uses it).

    ```mlir
    %y = mnemo.gelu %x {approximate = true} : tensor<16x64x512xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input,
                       DefaultValuedAttr<BoolAttr, "false">:$approximate);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Mnemo_PowOp : Mnemo_Op<"pow", [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise power by a constant exponent";
  let description = [{
    ```mlir
    %sq = mnemo.pow %x {exponent = 2.000000e+00 : f64} : tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, F64Attr:$exponent);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Mnemo_CastOp : Mnemo_Op<"cast", [Pure]> {
  let summary = "elementwise conversion to another element type";
  let description = [{
    Float-to-float casts round to nearest even; float-to-integer casts
    truncate toward zero.

    ```mlir
    %h = mnemo.cast %x : tensor<128x784xf32> -> tensor<128x784xbf16>
    ```
  }];
  let arguments = (ins Mnemo_AnyTensor:$input);
  let results = (outs Mnemo_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Mnemo_WhereOp : Mnemo_Op<"where", [Pure,
    AllTypesMatch<["on_true", "on_false", "result"]>]> {
  let summary = "elementwise select by a mask";
  let description = [{
    `result[i] = condition[i] ? on_true[i] : on_false[i]`; all shapes agree.

    ```mlir
    %m = mnemo.where %mask, %scores, %neg_inf
        : tensor<64x64xi1>, tensor<16x4x64x64xf32>
    ```
  }];
  let arguments = (ins Mnemo_MaskTensor:$condition,
                       Mnemo_AnyTensor:$on_true, Mnemo_AnyTensor:$on_false);
  let results = (outs Mnemo_AnyTensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` type($condition) `,`
    type($result)
  }];
  let hasVerifier = 1;
}

def Mnemo_CausalMaskOp : Mnemo_Op<"causal_mask", [Pure]> {
  let summary = "a lower-triangular mask";
  let description = [{
    A `[rows, cols]` mask, true where `col <= row + (cols - rows)`: position
    `row` may attend to every position up to and including itself.

    ```mlir
    %mask = mnemo.causal_mask : tensor<64x64xi1>
    ```
  }];
  let results = (outs Mnemo_MaskTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Mnemo_DropoutOp : Mnemo_Op<"dropout", [Pure, SameOperandsAndResultType]> {
  let summary = "inverted dropout with a fixed seed";
  let description = [{
    Zeroes each element with probability `p` and scales the rest by
    `1 / (1 - p)`. The mask is a pure function of `seed`, the step and the
    element index, so the backward pass regenerates it instead of storing it.

    ```mlir
    %y = mnemo.dropout %x {p = 1.000000e-01 : f64, seed = 3 : i64}
        : tensor<16x64x128xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, F64Attr:$p, I64Attr:$seed);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Mnemo_MatmulOp : Mnemo_Op<"matmul", [Pure]> {
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

def Mnemo_BatchMatmulOp : Mnemo_Op<"batch_matmul", [Pure]> {
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

def Mnemo_Conv2DOp : Mnemo_Op<"conv2d", [Pure]> {
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

class Mnemo_PoolOp<string mnemonic, string what>
    : Mnemo_Op<mnemonic, [Pure]> {
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
}

def Mnemo_MaxPool2DOp : Mnemo_PoolOp<"max_pool2d", "maximum">;
def Mnemo_AvgPool2DOp : Mnemo_PoolOp<"avg_pool2d", "average">;

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

class Mnemo_ReduceOp<string mnemonic, string what>
    : Mnemo_Op<mnemonic, [Pure]> {
  let summary = what # " over axes";
  let description = [{
    The }] # what # [{ over `axes`, which are removed from
    the shape or kept as size 1 with `keep_dims`.

    ```mlir
    %s = mnemo.}] # mnemonic # [{ %x {axes = array<i64: 1>, keep_dims = true}
        : (tensor<128x10xf32>) -> tensor<128x1xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "false">:$keep_dims);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_SumOp : Mnemo_ReduceOp<"sum", "sum">;
def Mnemo_MeanOp : Mnemo_ReduceOp<"mean", "mean">;
def Mnemo_MaxOp : Mnemo_ReduceOp<"max", "maximum">;

class Mnemo_SoftmaxLikeOp<string mnemonic, string what>
    : Mnemo_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what # " along an axis";
  let description = [{
    Numerically stable (the maximum is subtracted first).

    ```mlir
    %p = mnemo.}] # mnemonic # [{ %x {axis = -1 : i64} : tensor<16x4x64x64xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Mnemo_SoftmaxOp : Mnemo_SoftmaxLikeOp<"softmax", "softmax">;
def Mnemo_LogSoftmaxOp : Mnemo_SoftmaxLikeOp<"log_softmax", "log-softmax">;

def Mnemo_LayerNormOp : Mnemo_Op<"layernorm", [Pure,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["scale", "bias"]>]> {
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

def Mnemo_RmsNormOp : Mnemo_Op<"rmsnorm", [Pure,
    AllTypesMatch<["input", "result"]>]> {
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

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Mnemo_CrossEntropyOp : Mnemo_Op<"cross_entropy", [Pure]> {
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

def Mnemo_MseOp : Mnemo_Op<"mse", [Pure, AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "mean squared error";
  let description = [{
    ```mlir
    %loss = mnemo.mse %pred, %y : (tensor<64x1xf32>, tensor<64x1xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$lhs, Mnemo_FloatTensor:$rhs);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Mnemo_EmbeddingOp : Mnemo_Op<"embedding", [Pure]> {
  let summary = "row gather from an embedding table";
  let description = [{
    `table [V, D]` at `indices [...]` (i32) gives `[..., D]`.

    ```mlir
    %h = mnemo.embedding %wte, %tokens
        : (tensor<256x128xf32>, tensor<16x64xi32>) -> tensor<16x64x128xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$table, Mnemo_IndexTensor:$indices);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$table `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_ReshapeOp : Mnemo_Op<"reshape", [Pure]> {
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

def Mnemo_TransposeOp : Mnemo_Op<"transpose", [Pure]> {
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

def Mnemo_BroadcastOp : Mnemo_Op<"broadcast", [Pure]> {
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

def Mnemo_SliceOp : Mnemo_Op<"slice", [Pure]> {
  let summary = "a strided range along one axis";
  let description = [{
    Python's `x[start:end:step]` along `axis`, with `start` and `end` already
    resolved to `0 <= start < end <= dim`.

    ```mlir
    %q = mnemo.slice %qkv {axis = 2 : i64, start = 0 : i64, end = 128 : i64, step = 1 : i64}
        : (tensor<16x64x384xf32>) -> tensor<16x64x128xf32>
    ```
  }];
  let arguments = (ins Mnemo_AnyTensor:$input, I64Attr:$axis, I64Attr:$start,
                       I64Attr:$end, I64Attr:$step);
  let results = (outs Mnemo_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_ConcatOp : Mnemo_Op<"concat", [Pure]> {
  let summary = "concatenation along an axis";
  let description = [{
    ```mlir
    %c = mnemo.concat %a, %b {axis = 1 : i64}
        : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<8x48xf32>
    ```
  }];
  let arguments = (ins Variadic<Mnemo_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Mnemo_AnyTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // MNEMO_OPS_TD
