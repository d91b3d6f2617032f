//===- MatmulOps.td - Matrix products ---------------------*- tablegen -*-===//
//
// The products of a (batch of rows) by a matrix and of two batches of
// matrices, each operand optionally read transposed. Everything about them
// is in this folder: the ODS (here), the shape checks, the canonicalization
// that turns a transposed operand into a flag, the gradient rules and the
// workspaces they declare (MatmulOps.cpp), the reference interpreter's model
// (MatmulInterpreter.cpp), and the code both emitters write: OpenBLAS sgemm
// on the CPU (widened through the workspace for 16-bit storage) and
// cuBLASLt on the GPU (MatmulEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_MATMUL_MATMULOPS_TD
#define MNEMO_LANG_OPS_MATMUL_MATMULOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Mnemo_MatmulOp : Mnemo_Op<"matmul", [Mnemo_AmpLowPrecision, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
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

def Mnemo_BatchMatmulOp : Mnemo_Op<"batch_matmul", [Mnemo_AmpLowPrecision, Mnemo_FusionKernel, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CpuWorkspaceOpInterface>,
    DeclareOpInterfaceMethods<Mnemo_CudaScratchOpInterface>]> {
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

#endif // MNEMO_LANG_OPS_MATMUL_MATMULOPS_TD
