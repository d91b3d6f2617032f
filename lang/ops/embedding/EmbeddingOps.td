//===- EmbeddingOps.td - Table lookups ---------------------*- tablegen -*-===//
//
// Row gathers from an embedding table, as torch.nn.Embedding, and the
// scatter-add its gradient rule emits. Everything about them is in this
// folder: the ODS (here), the shape checks and the gradient rule
// (EmbeddingOps.cpp), the reference interpreter's model
// (EmbeddingInterpreter.cpp), the CPU and CUDA kernels (EmbeddingKernels.h,
// EmbeddingKernels.cuh) and the code both emitters write for them
// (EmbeddingEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_EMBEDDING_EMBEDDINGOPS_TD
#define MNEMO_LANG_OPS_EMBEDDING_EMBEDDINGOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Mnemo_EmbeddingOp : Mnemo_Op<"embedding", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
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

// The backward op: what the gradient rule emits (not differentiated again).

def Mnemo_EmbeddingGradOp : Mnemo_Op<"embedding_grad", [Mnemo_AmpFollow, Mnemo_FusionKernel, Pure, Mnemo_NoGradient]> {
  let summary = "scatter-add of row gradients into a table";
  let description = [{
    `result[indices[i], :] += grad[i, :]` into a zero `[V, D]` table, the
    gradient of `mnemo.embedding`.

    ```mlir
    %dt = mnemo.embedding_grad %dh, %tokens
        : (tensor<16x64x128xf32>, tensor<16x64xi32>) -> tensor<256x128xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$grad, Mnemo_IndexTensor:$indices);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // MNEMO_LANG_OPS_EMBEDDING_EMBEDDINGOPS_TD
