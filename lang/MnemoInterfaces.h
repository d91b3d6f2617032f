//===- MnemoInterfaces.h - Interfaces of the Mnemo op set -------*- C++ -*-===//

#ifndef MNEMO_LANG_MNEMOINTERFACES_H
#define MNEMO_LANG_MNEMOINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

namespace mnemo {

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

/// The op's fusion class (see MnemoInterfaces.td).
template <typename ConcreteType>
class FusionElementwise
    : public mlir::OpTrait::TraitBase<ConcreteType, FusionElementwise> {};
template <typename ConcreteType>
class FusionKernel
    : public mlir::OpTrait::TraitBase<ConcreteType, FusionKernel> {};

} // namespace mnemo

#include "lang/MnemoInterfaces.h.inc"

#endif // MNEMO_LANG_MNEMOINTERFACES_H
