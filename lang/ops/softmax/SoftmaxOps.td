//===- SoftmaxOps.td - softmax and log_softmax -------------*- tablegen -*-===//
//
// Softmax and log-softmax along one axis, as torch.softmax and
// torch.log_softmax. Everything about them is in this folder: the ODS
// (here), the axis check and the gradient rules (SoftmaxOps.cpp), the
// per-element formulas every implementation evaluates (SoftmaxFormulas.h),
// the reference interpreter's model (SoftmaxInterpreter.cpp), the CPU and
// CUDA kernels (SoftmaxKernels.h, SoftmaxKernels.cuh) and the code both
// emitters write (SoftmaxEmission.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_SOFTMAX_SOFTMAXOPS_TD
#define MNEMO_LANG_OPS_SOFTMAX_SOFTMAXOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Mnemo_SoftmaxLikeOp<string mnemonic, string what, Trait amp = Mnemo_AmpFollow>
    : Mnemo_Op<mnemonic, [amp, Mnemo_FusionKernel, Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let extraClassDeclaration = [{
    /// About 5 FLOPs an element: statistics, then the normalized value.
    int64_t getRecomputeFlops() {
      return 5 * ::llvm::cast<::mlir::ShapedType>(getType()).getNumElements();
    }
    /// The axis, in [0, rank) (the verifier has checked it).
    int64_t getNormalizedAxis();
    /// The input as [outer, n, inner] rows of n along the axis.
    std::array<int64_t, 3> getRowGeometry();
  }];
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

def Mnemo_SoftmaxOp : Mnemo_SoftmaxLikeOp<"softmax", "softmax", Mnemo_AmpF32>;
def Mnemo_LogSoftmaxOp : Mnemo_SoftmaxLikeOp<"log_softmax", "log-softmax", Mnemo_AmpF32>;

#endif // MNEMO_LANG_OPS_SOFTMAX_SOFTMAXOPS_TD
