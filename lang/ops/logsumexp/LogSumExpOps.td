//===- LogSumExpOps.td - logsumexp, a reduction family -----*- tablegen -*-===//
//
// log(sum(exp(x))) over one axis, computed stably. Everything about it is
// in this folder: the ODS (here), its shape check and gradient rule
// (LogSumExpOps.cpp), the reference interpreter's model
// (LogSumExpInterpreter.cpp), the CPU and CUDA kernels
// (LogSumExpKernels.h, LogSumExpKernels.cuh) and the code both emitters
// write for it (LogSumExpEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_LOGSUMEXP_LOGSUMEXPOPS_TD
#define MNEMO_LANG_OPS_LOGSUMEXP_LOGSUMEXPOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Mnemo_LogSumExpOp : Mnemo_Op<"logsumexp", [Mnemo_AmpF32, Mnemo_FusionKernel,
    Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let summary = "log of the sum of exponentials over an axis";
  let description = [{
    `torch.logsumexp(x, axis, keepdim)`: `m + log(sum(exp(x - m)))` with
    `m` the maximum along `axis` (0 where that is infinite, as PyTorch), so
    that no exponential overflows. The axis is removed from the shape, or
    kept as size 1 with `keep_dims`.

    ```mlir
    %l = mnemo.logsumexp %x {axis = -1 : i64}
        : (tensor<128x10xf32>) -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, I64Attr:$axis,
                       DefaultValuedAttr<BoolAttr, "false">:$keep_dims);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The reduced axis, counted from 0 (the verifier has checked it).
    int64_t getReducedAxis();
    /// The input as [outer, n, inner] around the reduced axis.
    std::array<int64_t, 3> getRowGeometry();
    /// A maximum, an exponential and a sum per input element.
    int64_t getRecomputeFlops() {
      return 3 * ::llvm::cast<::mlir::ShapedType>(getInput().getType())
                     .getNumElements();
    }
  }];
}

#endif // MNEMO_LANG_OPS_LOGSUMEXP_LOGSUMEXPOPS_TD
