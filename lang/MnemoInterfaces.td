//===- MnemoInterfaces.td - Interfaces of the Mnemo op set -*- tablegen -*-===//

#ifndef MNEMO_INTERFACES_TD
#define MNEMO_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Mnemo_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    The reverse-mode rule of an op: its vector-Jacobian product. Each op
    defines it once, in its family's folder (lang/ops/FAMILY/FAMILYOps.cpp
    or FAMILYGradients.cpp), and the autodiff pass only calls it; the pass
    has no per-op knowledge.
  }];
  let methods = [
    InterfaceMethod<[{
        Emits the gradients of the operands given the gradients of the
        results (null for a result that does not reach the loss). The
        backward pass calls it only where some result reaches the loss, so
        a one-result op always gets its result's gradient. Returns one
        value per operand, null where the operand gets no gradient (integer
        operands, masks).
      }],
      "::llvm::SmallVector<::mlir::Value>", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads)>,
  ];
}

def Mnemo_ElementwiseFormulaOpInterface
    : OpInterface<"ElementwiseFormulaOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    An elementwise op that one formula of
    lang/ops/elementwise/ElementwiseFormulas.h computes: the formula named
    after the op's mnemonic, called with the operands' elements and then the
    op's constants. The reference interpreter evaluates it in double, and
    both backends' fused loops call it in f32; the op-completeness test
    checks that the formula exists with these counts.
  }];
  let methods = [
    InterfaceMethod<"The formula's name in ElementwiseFormulas.h.",
      "::llvm::StringRef", "getFormulaName", (ins), "",
      [{ return $_op->getName().stripDialect(); }]>,
    InterfaceMethod<[{
        The op's attributes the formula takes after the operands, in its
        order (bools as 0 and 1).
      }],
      "::llvm::SmallVector<double>", "getFormulaConstants", (ins), "",
      [{ return {}; }]>,
  ];
}

// What an op family in a folder of its own (lang/ops/FAMILY/) gives each
// consumer, as MLIR external models: the family's FAMILYInterpreter.cpp and
// FAMILYEmission.cpp attach them, and the interpreter and the emitters
// attach every family's before they run (the generated
// register*Models functions, lang/CMakeLists.txt). The op-completeness test
// requires all three of a family op.
def Mnemo_InterpretedOpInterface : OpInterface<"InterpretedOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    The reference interpreter's evaluation of the op, in double, through the
    evaluator's OpContext (lang/interpreter/OpContext.h).
  }];
  let methods = [
    InterfaceMethod<"Evaluates the op; a failure says why in the context.",
      "::mlir::LogicalResult", "interpret",
      (ins "::mnemo::interp::OpContext &":$context)>,
  ];
}

def Mnemo_CpuKernelOpInterface : OpInterface<"CpuKernelOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    The CPU emitter's code for the op: a call of the family's CPU kernel
    with the operands' and results' planned pointers
    (codegen/KernelContext.h).
  }];
  let methods = [
    InterfaceMethod<"Writes the op's code; an error on the op if it cannot.",
      "::mlir::LogicalResult", "emitCpuKernel",
      (ins "::mnemo::codegen::CpuKernelContext &":$context)>,
  ];
}

def Mnemo_CudaKernelOpInterface : OpInterface<"CudaKernelOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    The CUDA emitter's code for the op: kernel launches that call the
    family's device functions (codegen/KernelContext.h).
  }];
  let methods = [
    InterfaceMethod<"Writes the op's kernels; an error on the op if it cannot.",
      "::mlir::LogicalResult", "emitCudaKernel",
      (ins "::mnemo::codegen::CudaKernelContext &":$context)>,
  ];
}

def Mnemo_CudaMultiTensorOpInterface
    : OpInterface<"CudaMultiTensorOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    An update of one tensor that the CUDA backend makes together with others
    in one launch (the optimizers' multi-tensor kernels). The CUDA emitter
    takes the optimizer's run (updates that follow each other, with views
    and folded multiplies between them), groups the updates that
    `sharesLaunchWith` pairs, and calls the first one's emitCudaKernel for
    the whole group (CudaKernelContext::group). A multiply of an update's
    gradient by a broadcast scalar that `foldsGradientScale` accepts is not
    emitted: the launch scales the gradient as it reads it
    (CudaKernelContext::foldedScale). The family attaches it with its CUDA
    model.
  }];
  let methods = [
    InterfaceMethod<"Whether one launch may make this update and `other`.",
      "bool", "sharesLaunchWith", (ins "::mlir::Operation *":$other)>,
    InterfaceMethod<"The gradient the update reads.",
      "::mlir::Value", "getUpdatedGradient", (ins)>,
    InterfaceMethod<[{
        Whether the launch may scale the gradient by `scale` (a rank-0 f32
        value) as it reads it, instead of a multiply of its own.
      }],
      "bool", "foldsGradientScale", (ins "::mlir::Value":$scale)>,
  ];
}

def Mnemo_CudaScratchOpInterface : OpInterface<"CudaScratchOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    An op whose CUDA kernels need scratch memory (per-row values, partial
    sums of a deterministic two-pass reduction) says how many bytes, from
    its shapes alone, in its family's FAMILYOps.cpp. The memory plan sizes
    the CUDA workspace by the largest such need (passes/Workspace.cpp), and
    the op's CUDA emission model asks for no more: the emitter refuses a
    scratch request the plan did not count.
  }];
  let methods = [
    InterfaceMethod<"Bytes of scratch the op's CUDA kernels use.",
      "int64_t", "getCudaScratchBytes", (ins)>,
  ];
}

def Mnemo_CpuWorkspaceOpInterface : OpInterface<"CpuWorkspaceOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    An op whose CPU kernels need working memory (a tile of a compressed
    weight decompressed for sgemm) says how many bytes, from its shapes
    alone, in its family's FAMILYOps.cpp. The memory plan sizes the CPU
    workspace by the largest such need (passes/Workspace.cpp), and the op's
    CPU emission model asks for no more: the emitter refuses a request the
    plan did not count.
  }];
  let methods = [
    InterfaceMethod<"Bytes of workspace the op's CPU kernels use.",
      "int64_t", "getCpuWorkspaceBytes", (ins)>,
  ];
}

def Mnemo_RecomputeCostOpInterface : OpInterface<"RecomputeCostOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    What recomputing the op costs, in floating-point operations (a
    multiply-add counts 2): remat (passes/Remat.cpp) weighs the bytes a
    recomputation frees against it, and the memory report shows the sum.
    Every op has it (Mnemo_Op adds it); the default, one per result element,
    fits elementwise ops, reductions and data movement. An op whose work is
    not proportional to its result declares `getRecomputeFlops` in its
    entry (products, convolutions, normalizations, views).
  }];
  let methods = [
    InterfaceMethod<"FLOPs to compute the op once.",
      "int64_t", "getRecomputeFlops", (ins), "",
      [{
        if ($_op->getNumResults() == 0)
          return 0;
        return ::llvm::cast<::mlir::ShapedType>($_op->getResult(0).getType())
            .getNumElements();
      }]>,
  ];
}

def Mnemo_FirstResultRecomputationOpInterface
    : OpInterface<"FirstResultRecomputationOpInterface"> {
  let cppNamespace = "::mnemo";
  let description = [{
    An op of several results whose first, the large one, a cheaper op can
    recompute from the op's operands and its other, small results, without
    the work that made them: batch_norm's output from its input and the
    channels' statistics (batch_norm_apply, one pass instead of three), as
    torch.compile's partitioner recomputes a batch norm's pointwise half
    from the saved mean and rstd. Remat (passes/Remat.cpp) recomputes the
    first result so; the op's other results stay as they were.
  }];
  let methods = [
    InterfaceMethod<[{
        The values the recomputation reads: some of the op's operands and
        results, in the order buildFirstResultRecomputation takes them.
      }],
      "::llvm::SmallVector<::mlir::Value>", "getFirstResultRecomputationOperands",
      (ins)>,
    InterfaceMethod<[{
        Creates the recomputation at the builder's insertion point from
        `operands` (getFirstResultRecomputationOperands' values or their
        replacements) and returns the value that stands for the first
        result.
      }],
      "::mlir::Value", "buildFirstResultRecomputation",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$operands)>,
    InterfaceMethod<"FLOPs of the recomputation (RecomputeCostOpInterface's "
                    "measure).",
      "int64_t", "getFirstResultRecomputationFlops", (ins)>,
  ];
}

// Ops that no gradient flows through: masks, metrics, the backward ops
// themselves and the optimizer. Every op has either this trait or the
// gradient interface; a test checks that none is forgotten.
def Mnemo_NoGradient : NativeOpTrait<"NoGradient"> {
  let cppNamespace = "::mnemo";
}

// Mixed precision (the amp pass): which precision an op computes in, as
// PyTorch's autocast lists say. Every op has exactly one of these; a test
// checks that none is forgotten, and --amp-policy files move ops between
// them by name.
// - AmpLowPrecision: casts its float operands to the low type (bf16/f16)
//   and computes there (products and convolutions, on tensor cores).
def Mnemo_AmpLowPrecision : NativeOpTrait<"AmpLowPrecision"> {
  let cppNamespace = "::mnemo";
}
// - AmpF32: computes in f32 (reductions, exponentials, normalizations and
//   losses, whose accuracy low precision would lose).
def Mnemo_AmpF32 : NativeOpTrait<"AmpF32"> {
  let cppNamespace = "::mnemo";
}
// - AmpFollow: computes in the widest type of its float operands
//   (elementwise ops, views, everything outside the forward).
def Mnemo_AmpFollow : NativeOpTrait<"AmpFollow"> {
  let cppNamespace = "::mnemo";
}
// Beside its category: the op's results after the first are statistics
// that stay f32 whatever the op computes in: attention's log-sum-exp,
// which the backward exponentiates, and batch norm's channel mean and
// variance, which the running statistics and the backward read.
def Mnemo_AmpStatisticsStayF32 : NativeOpTrait<"AmpStatisticsStayF32"> {
  let cppNamespace = "::mnemo";
}
// Beside its category: every result stays f32 (a loss computed from
// low-precision operands, and its rows' log-sum-exp).
def Mnemo_AmpResultsStayF32 : NativeOpTrait<"AmpResultsStayF32"> {
  let cppNamespace = "::mnemo";
}
// Beside its category: the op computes in its first operand's type and
// only that operand is cast; the others (batch norm's scale and bias) keep
// their f32, as PyTorch's batch norm reads f32 parameters beside 16-bit
// data (autocast lists no cast for it) and cuDNN's takes them so.
def Mnemo_AmpParametersStayF32 : NativeOpTrait<"AmpParametersStayF32"> {
  let cppNamespace = "::mnemo";
}

// Fusion (fuse-elementwise, the planner and both emitters): every op has
// exactly one class, and a test checks that none is forgotten.
// - FusionElementwise: one result element from the operands' elements at
//   the same index; a chain of them is one loop (the emitters' fused-loop
//   expressions render each), and it may write into a dying operand.
def Mnemo_FusionElementwise : NativeOpTrait<"FusionElementwise"> {
  let cppNamespace = "::mnemo";
}
// - FusionKernel: a kernel of its own (products, reductions, normalizations,
//   losses, views, optimizer updates); its result is a loop's input.
def Mnemo_FusionKernel : NativeOpTrait<"FusionKernel"> {
  let cppNamespace = "::mnemo";
}

#endif // MNEMO_INTERFACES_TD
