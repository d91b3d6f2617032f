//===- MnemoInterfaces.h - Interfaces of the Mnemo op set -------*- C++ -*-===//

#ifndef MNEMO_LANG_MNEMOINTERFACES_H
#define MNEMO_LANG_MNEMOINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

namespace mnemo {

/// Marks an op that no gradient flows through (see MnemoInterfaces.td).
template <typename ConcreteType>
class NoGradient : public mlir::OpTrait::TraitBase<ConcreteType, NoGradient> {};

} // namespace mnemo

#include "lang/MnemoInterfaces.h.inc"

#endif // MNEMO_LANG_MNEMOINTERFACES_H
