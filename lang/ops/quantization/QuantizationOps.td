//===- QuantizationOps.td - Fake quantization and int8 -*- tablegen -*-===//
//
// Quantization as the train section's `qat` directive and `mnemoc
// --mode=inference` compile it: observers and fake quantization (PyTorch's
// torch.ao.quantization) for training; for inference, int8 / int4 weights
// with dynamically quantized activations, and the compressed formats of
// pruned weights (2:4-packed, CSR). Everything about them
// is in this folder: the ODS (here), the checks and fake_quant's gradient
// (QuantizationOps.cpp), the rules the trainer's kernels share
// (QuantizationFormulas.h), the interpreter's own reference rules and model
// (QuantizationReference.cpp, QuantizationInterpreter.cpp), the CPU and
// CUDA kernels (QuantizationKernels.h/.cpp, QuantizationKernels.cuh) and
// the code both emitters write for them (QuantizationEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONOPS_TD
#define MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Quantization-aware training
//===----------------------------------------------------------------------===//

def Mnemo_ObserveMinMaxOp : Mnemo_Op<"observe_minmax", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["min", "max", "new_min", "new_max"]>]> {
  let summary = "a quantization observer: the running range of a tensor";
  let description = [{
    The range of `input` per channel along `axis` (`min`, `max` are `[C]`
    with C = the axis' size; `[1]` and axis -1 for the whole tensor), as
    PyTorch's observers keep it: at the first step the range seen; after,
    with `averaging_constant` 0, the running extremes (MinMaxObserver), else
    `old + c * (seen - old)` (MovingAverageMinMaxObserver, c = 0.01).

    ```mlir
    %lo2, %hi2 = mnemo.observe_minmax %w, %lo, %hi, %step {averaging_constant = 0.0 : f64, axis = 0 : i64}
        : (tensor<512x784xf32>, tensor<512xf32>, tensor<512xf32>, tensor<i64>) -> (tensor<512xf32>, tensor<512xf32>)
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$input,
                       1DTensorOf<[F32]>:$min, 1DTensorOf<[F32]>:$max,
                       0DTensorOf<[I64]>:$step, I64Attr:$axis,
                       F64Attr:$averaging_constant);
  let results = (outs 1DTensorOf<[F32]>:$new_min, 1DTensorOf<[F32]>:$new_max);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_FakeQuantOp : Mnemo_Op<"fake_quant", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure,
    DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["min", "max"]>]> {
  let summary = "quantize and dequantize with an observed range";
  let description = [{
    `(clamp(round(x / scale) + zp, quant_min, quant_max) - zp) * scale`
    per channel along `axis` (-1: one range for the tensor), with PyTorch's
    scale and zero point from the range [min, max] widened to hold 0
    (symmetric: zp = 0 and scale = max|range| / ((quant_max - quant_min) /
    2); affine: scale = (max - min) / (quant_max - quant_min)), rounding
    half to even (QuantizationFormulas.h). Its gradient is the
    straight-through estimator clipped to the range: the output's gradient
    where `round(x / scale) + zp` lies in [quant_min, quant_max], else 0.

    ```mlir
    %wq = mnemo.fake_quant %w, %lo, %hi {axis = 0 : i64, quant_max = 127 : i64, quant_min = -128 : i64, symmetric = true}
        : (tensor<512x784xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<512x784xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$input,
                       1DTensorOf<[F32]>:$min, 1DTensorOf<[F32]>:$max,
                       I64Attr:$axis, I64Attr:$quant_min, I64Attr:$quant_max,
                       BoolAttr:$symmetric);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_FakeQuantGradOp : Mnemo_Op<"fake_quant_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["grad", "input", "result"]>, AllTypesMatch<["min", "max"]>]> {
  let summary = "the clipped straight-through gradient of fake_quant";
  let description = [{
    `grad` where `fake_quant`'s `round(x / scale) + zp` lies in
    [quant_min, quant_max], 0 elsewhere (PyTorch's fake-quantize backward).

    ```mlir
    %gw = mnemo.fake_quant_grad %g, %w, %lo, %hi {axis = 0 : i64, quant_max = 127 : i64, quant_min = -128 : i64, symmetric = true}
        : (tensor<512x784xf32>, tensor<512x784xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<512x784xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$grad,
                       StaticShapeTensorOf<[F32]>:$input,
                       1DTensorOf<[F32]>:$min, 1DTensorOf<[F32]>:$max,
                       I64Attr:$axis, I64Attr:$quant_min, I64Attr:$quant_max,
                       BoolAttr:$symmetric);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Quantized weights for inference (mnemoc --mode=inference)
//===----------------------------------------------------------------------===//

def Mnemo_QuantizeRowsOp : Mnemo_Op<"quantize_rows", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient]> {
  let summary = "dynamic symmetric int8 quantization of each row";
  let description = [{
    Each row of `input [..., K]` (leading dimensions are rows, as in
    `matmul`) as int8 codes `round(x / scale)` (half to even) with the row's
    own `scale = max|x| / 127` (1 for a row of zeros), and the sum of the
    row's codes (what an affine weight's zero point needs). The activations
    of an int8 GEMM, quantized per batch as PyTorch's `quantize_dynamic`
    does per tensor. A row holding a NaN or an infinity gets an infinite
    scale and codes 0, so that `matmul_int8` gives NaN in each of its
    outputs, as the f32 product would.

    ```mlir
    %xq, %xs, %xsum = mnemo.quantize_rows %x
        : (tensor<128x784xf32>) -> (tensor<128x784xi8>, tensor<128xf32>, tensor<128xi32>)
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$input);
  let results = (outs StaticShapeTensorOf<[I8]>:$codes,
                      1DTensorOf<[F32]>:$scale, 1DTensorOf<[I32]>:$sum);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_MatmulInt8Op : Mnemo_Op<"matmul_int8", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
  let summary = "int8 GEMM with int32 accumulation, rescaled to f32";
  let description = [{
    `x @ W^T` from int8 codes: `lhs [..., K]` with per-row scales and code
    sums (`quantize_rows`), and a weight `rhs [N, K]` quantized per output
    channel (`rhs_scale`, `rhs_zero_point`, `[N]`, as `train --export`
    writes them). Accumulates `sum_k lhs[m,k] * rhs[n,k]` exactly in int32,
    then `result[m,n] = lhs_scale[m] * rhs_scale[n] * (acc - rhs_zero_point[n]
    * lhs_sum[m])`. Within int8 rounding of the activations, this is
    `x @ fake_quant(W)^T`.

    ```mlir
    %y = mnemo.matmul_int8 %xq, %xs, %xsum, %w, %ws, %wz
        : (tensor<128x784xi8>, tensor<128xf32>, tensor<128xi32>, tensor<512x784xi8>, tensor<512xf32>, tensor<512xi32>) -> tensor<128x512xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[I8]>:$lhs, 1DTensorOf<[F32]>:$lhs_scale,
                       1DTensorOf<[I32]>:$lhs_sum, 2DTensorOf<[I8]>:$rhs,
                       1DTensorOf<[F32]>:$rhs_scale,
                       1DTensorOf<[I32]>:$rhs_zero_point);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_DequantizeOp : Mnemo_Op<"dequantize", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient]> {
  let summary = "int8 or packed int4 codes back to f32";
  let description = [{
    `(code - zero_point[c]) * scale[c]`, where element `e` of the result
    (row-major) belongs to channel `c = e / (numel / C)` of the `C` scales:
    per output channel, per group of consecutive elements or per tensor.
    With `bits = 8` the codes are the result's elements as int8; with
    `bits = 4` two codes share a byte, element `e` in the low nibble of
    byte `e / 2` when `e` is even (`train --export`'s packing), sign
    extended.

    ```mlir
    %w = mnemo.dequantize %codes, %scale, %zero {bits = 4 : i64}
        : (tensor<200704xi8>, tensor<25088xf32>, tensor<25088xi32>) -> tensor<512x784xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[I8]>:$codes, 1DTensorOf<[F32]>:$scale,
                       1DTensorOf<[I32]>:$zero_point, I64Attr:$bits);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Sparse weights for inference: 2:4-packed and CSR (pruned weights)
//===----------------------------------------------------------------------===//

def Mnemo_MatmulSparse24Op : Mnemo_Op<"matmul_sparse24", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>]> {
  let summary = "x @ W^T with a 2:4-sparse weight in packed form";
  let description = [{
    `rhs` is a weight `[N, K]` with two nonzeros in every group of four
    consecutive elements of a row, stored as its kept values `[N, K/2]` and
    their positions in the group, 2 bits each, four per byte (`[N, K/8]`,
    the kept pair of group `g` in bits `4*(g%2)` to `4*(g%2)+3` of byte
    `g/2`), as `train --export` writes them and as sparse tensor cores read
    them.

    ```mlir
    %y = mnemo.matmul_sparse24 %x, %values, %indices
        : (tensor<128x784xf32>, tensor<512x392xf32>, tensor<512x98xi8>) -> tensor<128x512xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$lhs, 2DTensorOf<[F32]>:$values,
                       2DTensorOf<[I8]>:$indices);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_MatmulCsrOp : Mnemo_Op<"matmul_csr", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>]> {
  let summary = "x @ W^T with a weight in compressed sparse rows";
  let description = [{
    `W [N, K]` (N = `row_offsets`' size - 1, K = `lhs`' last dimension) as
    CSR: row `n`'s nonzeros are `values[row_offsets[n] : row_offsets[n+1]]`
    in columns `columns[...]` (i16 when K fits, else i32). The plan holds
    `values` and `columns` at the capacity the prune directive guarantees;
    entries past `row_offsets[N]` are not read.

    ```mlir
    %y = mnemo.matmul_csr %x, %values, %columns, %offsets
        : (tensor<128x784xf32>, tensor<200704xf32>, tensor<200704xi16>, tensor<513xi32>) -> tensor<128x512xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$lhs, 1DTensorOf<[F32]>:$values,
                       1DTensorOf<[I16, I32]>:$columns,
                       1DTensorOf<[I32]>:$row_offsets);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // MNEMO_LANG_OPS_QUANTIZATION_QUANTIZATIONOPS_TD
