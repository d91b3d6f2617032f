//===- ReductionsOps.td - sum, mean and max over axes -----*- tablegen -*-===//
//
// Reductions over any set of axes, as torch.sum, torch.mean and torch.amax,
// and the backward op of max. Everything about them is in this folder: the
// ODS (here), the shape checks, gradient rules and CUDA scratch needs
// (ReductionsOps.cpp), the reference interpreter's model
// (ReductionsInterpreter.cpp), the CPU kernels (ReductionsKernels.h and
// .cpp), the CUDA device functions (ReductionsKernels.cuh) and the code both
// emitters write for them (ReductionsEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_REDUCTIONS_REDUCTIONSOPS_TD
#define MNEMO_LANG_OPS_REDUCTIONS_REDUCTIONSOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Mnemo_ReduceOp<string mnemonic, string what, Trait amp = Mnemo_AmpFollow>
    : Mnemo_Op<mnemonic, [amp, Mnemo_FusionKernel, Pure,
        DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
        DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
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
  let extraClassDeclaration = [{
    /// The reduced axes as bits over the input's dimensions (bit d: axis d).
    uint32_t getReducedMask();
    /// Row chunks of the CUDA kernels' two-pass column reduction, for many
    /// outputs contiguous in the input with many elements each; 0 where
    /// another kernel reduces (ReductionsOps.cpp).
    int64_t getCudaColumnChunks();
  }];
}

def Mnemo_SumOp : Mnemo_ReduceOp<"sum", "sum", Mnemo_AmpF32>;
def Mnemo_MeanOp : Mnemo_ReduceOp<"mean", "mean", Mnemo_AmpF32>;
def Mnemo_MaxOp : Mnemo_ReduceOp<"max", "maximum">;

def Mnemo_MaxGradOp : Mnemo_Op<"max_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "gradient of a max reduction";
  let description = [{
    The gradient of `mnemo.max`, shared evenly among the positions that hold
    the maximum (as `torch.amax`). `maximum` is the forward's result.

    ```mlir
    %dx = mnemo.max_grad %dy, %x, %m {axes = array<i64: 1>}
        : (tensor<4xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, Mnemo_FloatTensor:$input,
                       Mnemo_FloatTensor:$maximum, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "false">:$keep_dims);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The forward max's reduced axes as bits over the input's dimensions.
    uint32_t getReducedMask();
  }];
}

#endif // MNEMO_LANG_OPS_REDUCTIONS_REDUCTIONSOPS_TD
