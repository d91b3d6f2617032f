//===- MnemoInterfaces.td - Interfaces of the Mnemo op set -*- tablegen -*-===//

#ifndef MNEMO_INTERFACES_TD
#define MNEMO_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Mnemo_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    The reverse-mode rule of an op: its vector-Jacobian product. Each op
    defines it once, next to the op (lang/MnemoGradients.cpp), and the
    autodiff pass only calls it; the pass has no per-op knowledge.
  }];
  let methods = [
    InterfaceMethod<[{
        Emits the gradients of the operands given the gradients of the
        results (null for a result that does not reach the loss). Returns
        one value per operand, null where the operand gets no gradient
        (integer operands, masks).
      }],
      "::llvm::SmallVector<::mlir::Value>", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads)>,
  ];
}

// Ops that no gradient flows through: masks, metrics, the backward ops
// themselves and the optimizer. Every op has either this trait or the
// gradient interface; a test checks that none is forgotten.
def Mnemo_NoGradient : NativeOpTrait<"NoGradient"> {
  let cppNamespace = "::mnemo";
}

#endif // MNEMO_INTERFACES_TD
