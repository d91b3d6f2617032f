//===- AttentionOps.td - fused scaled dot-product attention -*- tablegen -*-===//
//
// Scaled dot-product attention as one op, as
// torch.nn.functional.scaled_dot_product_attention, computed the
// FlashAttention-2 way: the forward keeps the output and one log-sum-exp
// per query row, never the [Tq, Tk] probabilities; the backward recomputes
// them tile by tile. Everything about it is in this folder: the ODS (here),
// the shape checks, gradient rule and workspace sizes (AttentionOps.cpp),
// the formulas every implementation shares (AttentionFormulas.h), the
// reference interpreter's unfused model (AttentionInterpreter.cpp), the
// CPU and CUDA kernels (AttentionKernels.h, AttentionKernels.cuh) and the
// code both emitters write (AttentionEmission.cpp). The rewrite that finds
// the written-out pattern is passes/FuseAttention.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_ATTENTION_ATTENTIONOPS_TD
#define MNEMO_LANG_OPS_ATTENTION_ATTENTIONOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Mnemo_AttentionMaskTensor : StaticShapeTensorOf<[F32, F16, BF16, I1]>;

class Mnemo_AttentionLikeOp<string mnemonic, list<Trait> traits>
    : Mnemo_Op<mnemonic, !listconcat(traits, [Mnemo_FusionKernel, Pure,
        DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>,
        DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Mnemo_AttentionOp : Mnemo_AttentionLikeOp<"attention", [Mnemo_AmpLowPrecision, Mnemo_AmpStatisticsStayF32,
    DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let extraClassDeclaration = [{
    /// The two products (scores and output), halved under a causal mask.
    int64_t getRecomputeFlops();
    /// The problem's sizes (AttentionFormulas.h's AttentionGeometry).
    ::mnemo::attention::AttentionGeometry getGeometry();
  }];
  let summary = "fused scaled dot-product attention";
  let description = [{
    `softmax(q @ k^T * scale + mask) @ v` per head, with the probabilities
    dropped out (`dropout_p`, inverted; the mask is a function of `seed`,
    the step and the element's index in [..., H, Tq, Tk], as
    `mnemo.dropout` draws it, so the rewrite of a written-out
    `dropout(softmax(...))` keeps its masks). q is [..., H, Tq, D], k
    [..., Hkv, Tk, D] and v [..., Hkv, Tk, Dv]: query head h reads key/value
    head h / (H / Hkv) (grouped-query attention, as `repeat_interleave` or
    LLaMA's repeat_kv). `causal` hides key j from query i when j > i
    (torch's `is_causal`); `mask` is added (float) or selects (i1: true
    takes part, as torch's boolean `attn_mask`). A row with no key left
    gives zeros, with a log-sum-exp of -inf.

    The second result is each query row's log-sum-exp of its scaled,
    masked scores, in f32 whatever the precision: the backward recomputes
    the probabilities from it.

    ```mlir
    %o, %lse = mnemo.attention %q, %k, %v {causal = true, dropout_p = 0.0 : f64,
        scale = 0.125 : f64, seed = 0 : i64}
        : (tensor<2x12x256x64xf32>, tensor<2x12x256x64xf32>, tensor<2x12x256x64xf32>)
        -> (tensor<2x12x256x64xf32>, tensor<2x12x256xf32>)
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$query, Mnemo_FloatTensor:$key,
                       Mnemo_FloatTensor:$value,
                       Optional<Mnemo_AttentionMaskTensor>:$mask,
                       BoolAttr:$causal, F64Attr:$scale, F64Attr:$dropout_p,
                       I64Attr:$seed);
  let results = (outs Mnemo_FloatTensor:$result,
                      StaticShapeTensorOf<[F32]>:$log_sum_exp);
}

def Mnemo_AttentionGradOp : Mnemo_AttentionLikeOp<"attention_grad", [Mnemo_AmpFollow, Mnemo_NoGradient]> {
  let extraClassDeclaration = [{
    /// The five products of the FlashAttention-2 backward.
    int64_t getRecomputeFlops();
    ::mnemo::attention::AttentionGeometry getGeometry();
  }];
  let summary = "gradient of fused attention's queries, keys and values";
  let description = [{
    From the forward's operands, its output and log-sum-exp, and the
    output's gradient: the probabilities are recomputed per tile from the
    log-sum-exp, and the dropout mask from the seed. Key and value
    gradients of a grouped head sum over the query heads that read it.

    ```mlir
    %dq, %dk, %dv = mnemo.attention_grad %q, %k, %v, %o, %lse, %do
        {causal = true, dropout_p = 0.0 : f64, scale = 0.125 : f64, seed = 0 : i64}
        : (tensor<2x12x256x64xf32>, tensor<2x12x256x64xf32>, tensor<2x12x256x64xf32>,
           tensor<2x12x256x64xf32>, tensor<2x12x256xf32>, tensor<2x12x256x64xf32>)
        -> (tensor<2x12x256x64xf32>, tensor<2x12x256x64xf32>, tensor<2x12x256x64xf32>)
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$query, Mnemo_FloatTensor:$key,
                       Mnemo_FloatTensor:$value, Mnemo_FloatTensor:$output,
                       StaticShapeTensorOf<[F32]>:$log_sum_exp,
                       Mnemo_FloatTensor:$grad_output,
                       Optional<Mnemo_AttentionMaskTensor>:$mask,
                       BoolAttr:$causal, F64Attr:$scale, F64Attr:$dropout_p,
                       I64Attr:$seed);
  let results = (outs Mnemo_FloatTensor:$query_grad, Mnemo_FloatTensor:$key_grad,
                      Mnemo_FloatTensor:$value_grad);
}

#endif // MNEMO_LANG_OPS_ATTENTION_ATTENTIONOPS_TD
