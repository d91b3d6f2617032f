//===- DataMovementOps.td - slices, concatenation, masks --*- tablegen -*-===//
//
// Ops that move elements without arithmetic. Constants, reshapes,
// transposes and broadcasts have no kernel of their own: the step layouts
// (codegen/StepLayout.h) make a constant a literal or a static array, a
// reshape or a strided transpose a view of its operand, and read a
// broadcast through; what is left of them is a copy loop. A strided slice
// along one axis and its gradient, concatenation and the causal mask are
// kernels. Everything about these is in this folder: the ODS (here), the
// shape checks, folders and gradient rules (DataMovementOps.cpp), the
// reference interpreter's model (DataMovementInterpreter.cpp), the CPU and
// CUDA kernels (DataMovementKernels.h, DataMovementKernels.cuh) and the
// code both emitters write for them (DataMovementEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_DATAMOVEMENT_DATAMOVEMENTOPS_TD
#define MNEMO_LANG_OPS_DATAMOVEMENT_DATAMOVEMENTOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"


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

def Mnemo_SliceOp : Mnemo_Op<"slice", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
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
  let extraClassDeclaration = [{
    /// The slice over the larger tensor seen as [outer, axis, inner]:
    /// {outer, axis size, inner, start, count, step} (DataMovementOps.cpp).
    std::array<int64_t, 6> getSliceGeometry();
  }];
}

def Mnemo_ConcatOp : Mnemo_Op<"concat", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
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

// The backward op of slice, which is also pad's forward (its own gradient
// is the slice back out).

def Mnemo_SliceGradOp : Mnemo_Op<"slice_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let summary = "a slice's gradient, placed in zeros of the input's shape";
  let description = [{
    Places `grad` at `start:end:step` along `axis` of a zero tensor of the
    result's shape: what slice's gradient rule emits, and the zero padding
    of the `pad` builtin.

    ```mlir
    %dx = mnemo.slice_grad %dq {axis = 2 : i64, start = 0 : i64, end = 128 : i64, step = 1 : i64}
        : (tensor<16x64x128xf32>) -> tensor<16x64x384xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, I64Attr:$axis, I64Attr:$start,
                       I64Attr:$end, I64Attr:$step);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The slice over the larger tensor seen as [outer, axis, inner]:
    /// {outer, axis size, inner, start, count, step} (DataMovementOps.cpp).
    std::array<int64_t, 6> getSliceGeometry();
  }];
}

// The mask attention builds its causal restriction from.

def Mnemo_CausalMaskOp : Mnemo_Op<"causal_mask", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient]> {
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

#endif // MNEMO_LANG_OPS_DATAMOVEMENT_DATAMOVEMENTOPS_TD
