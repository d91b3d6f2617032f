//===- PruningOps.td - Pruning masks and their application -*- tablegen -*-===//
//
// Magnitude, structured and N:M pruning on Zhu & Gupta's schedule, as a
// `prune` directive of the train section compiles: one op updates the
// masks, another zeroes what they mark. (The products that run a pruned
// weight compressed for inference, 2:4-packed or CSR, are the quantization
// family's compressed formats.) Everything about them is in this folder:
// the ODS (here), the shape checks (PruningOps.cpp), the rules the
// trainer's kernels share (PruningFormulas.h), the interpreter's own
// reference rules and model (PruningReference.cpp,
// PruningInterpreter.cpp), the CPU and CUDA kernels (PruningKernels.h,
// PruningKernels.cuh) and the code both emitters write for them
// (PruningEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_PRUNING_PRUNINGOPS_TD
#define MNEMO_LANG_OPS_PRUNING_PRUNINGOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Mnemo_PruneMasksOp : Mnemo_Op<"prune_masks", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AttrSizedOperandSegments]> {
  let summary = "pruning masks, updated on the steps a schedule names";
  let description = [{
    One `prune` directive of the train section. Each weight has a mask of
    one bit per element (`[ceil(n / 32)]` i32 words, bit j of word w for
    element 32 w + j; a set bit marks a pruned element). At the steps that
    Zhu & Gupta's schedule names (`start`, every `every` steps, `end`;
    one-shot at `start` when end <= start; PruningFormulas.h), the masks
    are recomputed from the weights; at other steps they come out as they
    went in. `method` is one of:

    - `magnitude`: the `sparsity` fraction of smallest |w| over all the
      weights together (global scope; a per-layer directive makes one op
      per weight);
    - `structured`: per weight, the `sparsity` fraction of its slices along
      `dim` with the smallest `norm` (`l1` or `l2`);
    - `nm`: per weight, in every group of `m` consecutive elements, the
      `m - n` smallest (2:4 for sparse tensor cores).

    Pruned elements sort first, so masks only grow. Ties go to the lower
    index, so every backend prunes the same elements. `updated` is 1 when
    this step recomputed the masks, else 0.

    ```mlir
    %m2, %updated = mnemo.prune_masks %step : tensor<i64> weights(%w : tensor<512x784xf32>) masks(%m : tensor<12544xi32>)
        {dim = 0 : i64, end = 2000 : i64, every = 100 : i64, m = 4 : i64, method = "magnitude",
         n = 2 : i64, norm = "l2", sparsity = 5.000000e-01 : f64, start = 200 : i64} -> (tensor<12544xi32>), tensor<i32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$step,
                       Variadic<StaticShapeTensorOf<[F32]>>:$weights,
                       Variadic<1DTensorOf<[I32]>>:$masks,
                       StrAttr:$method, F64Attr:$sparsity, I64Attr:$start,
                       I64Attr:$end, I64Attr:$every, StrAttr:$norm,
                       I64Attr:$dim, I64Attr:$n, I64Attr:$m);
  let results = (outs Variadic<1DTensorOf<[I32]>>:$new_masks,
                      0DTensorOf<[I32]>:$updated);
  let assemblyFormat = [{
    $step `:` type($step) `weights` `(` $weights `:` type($weights) `)`
    `masks` `(` $masks `:` type($masks) `)` attr-dict
    `->` `(` type($new_masks) `)` `,` type($updated)
  }];
  let hasVerifier = 1;
}

def Mnemo_ApplyMaskOp : Mnemo_Op<"apply_mask", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "zeroes the elements that a pruning mask marks";
  let description = [{
    `input` with every element whose bit is set in `mask` (`prune_masks`'
    layout) replaced by zero, of any element type: a gradient is masked
    before the optimizer, and a weight and its optimizer state (8-bit codes
    included: code 0 is 0.0) after it, so pruned elements stay exactly zero.
    With `when` (a `prune_masks`' `updated`) zero, the input comes out as it
    is: after a step that changed no mask, a masked gradient has kept the
    weight and its state zero where pruned.

    ```mlir
    %g2 = mnemo.apply_mask %g, %m : tensor<512x784xf32>, tensor<12544xi32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, 1DTensorOf<[I32]>:$mask,
                       Optional<0DTensorOf<[I32]>>:$when);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `,` $mask (`when` $when^ `:` type($when))? attr-dict `:` type($input) `,` type($mask)
  }];
  let hasVerifier = 1;
}

#endif // MNEMO_LANG_OPS_PRUNING_PRUNINGOPS_TD
