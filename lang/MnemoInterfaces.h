//===- MnemoInterfaces.h - Interfaces of the Mnemo op set -------*- C++ -*-===//

#ifndef MNEMO_LANG_MNEMOINTERFACES_H
#define MNEMO_LANG_MNEMOINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "llvm/ADT/APFloat.h"

namespace mnemo {
namespace interp {
class OpContext;
} // namespace interp
namespace codegen {
class CpuKernelContext;
class CudaKernelContext;
} // namespace codegen

/// Marks an op that no gradient flows through (see MnemoInterfaces.td).
template <typename ConcreteType>
class NoGradient : public mlir::OpTrait::TraitBase<ConcreteType, NoGradient> {};

/// The op's mixed-precision category (see MnemoInterfaces.td).
template <typename ConcreteType>
class AmpLowPrecision
    : public mlir::OpTrait::TraitBase<ConcreteType, AmpLowPrecision> {};
template <typename ConcreteType>
class AmpF32 : public mlir::OpTrait::TraitBase<ConcreteType, AmpF32> {};
template <typename ConcreteType>
class AmpFollow : public mlir::OpTrait::TraitBase<ConcreteType, AmpFollow> {};
/// Results after the first stay f32 under amp (see MnemoInterfaces.td).
template <typename ConcreteType>
class AmpStatisticsStayF32
    : public mlir::OpTrait::TraitBase<ConcreteType, AmpStatisticsStayF32> {};
template <typename ConcreteType>
class AmpResultsStayF32
    : public mlir::OpTrait::TraitBase<ConcreteType, AmpResultsStayF32> {};
/// Only the first operand is cast under amp (see MnemoInterfaces.td).
template <typename ConcreteType>
class AmpParametersStayF32
    : public mlir::OpTrait::TraitBase<ConcreteType, AmpParametersStayF32> {};

/// The op's fusion class (see MnemoInterfaces.td).
template <typename ConcreteType>
class FusionElementwise
    : public mlir::OpTrait::TraitBase<ConcreteType, FusionElementwise> {};
template <typename ConcreteType>
class FusionKernel
    : public mlir::OpTrait::TraitBase<ConcreteType, FusionKernel> {};

/// A convolution (conv2d, conv2d_input_grad, conv2d_weight_grad) in the
/// forward convolution's terms: input [n, c, h, w], weight [o, c, kh, kw],
/// output [n, o, ho, wo] (lang/ops/convolution, getConvGeometry).
struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, ho, wo;
  int64_t strideH, strideW, padH, padW;
  /// Images per im2col + GEMM on the CPU: as many as fit a few MiB of
  /// scratch, so the GEMMs are large without the workspace growing with the
  /// batch.
  int64_t imagesPerGemm;
};

/// The CUDA workspace a cuBLASLt or cuDNN call may use: 32 MiB, what NVIDIA
/// recommends for Hopper's kernels (as PyTorch gives it there). The ops
/// that call them count it in their CUDA scratch (CudaScratchOpInterface).
constexpr int64_t kCudaLibraryWorkspaceBytes = 32 << 20;

/// An attribute's value as an elementwise formula's constant
/// (ElementwiseFormulaOpInterface::getFormulaConstants).
inline double formulaConstant(const llvm::APFloat &value) {
  return value.convertToDouble();
}
inline double formulaConstant(bool value) { return value ? 1.0 : 0.0; }

/// The gradient rule of every activation (lang/ops/elementwise): its
/// backward op, `<name>_grad(grad, input)`, or `<name>_grad(grad, output)`
/// with `fromOutput`, with the forward's attributes (ElementwiseGradients.cpp).
llvm::SmallVector<mlir::Value>
buildActivationGradient(mlir::Operation *op, mlir::OpBuilder &builder,
                        llvm::ArrayRef<mlir::Value> grads, bool fromOutput);

} // namespace mnemo

#include "lang/MnemoInterfaces.h.inc"

#endif // MNEMO_LANG_MNEMOINTERFACES_H
