//===- MnemoOps.h - The Mnemo op set ----------------------------*- C++ -*-===//

#ifndef MNEMO_LANG_MNEMOOPS_H
#define MNEMO_LANG_MNEMOOPS_H

#include "lang/MnemoDialect.h"
#include "lang/MnemoInterfaces.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "lang/MnemoOps.h.inc"

#endif // MNEMO_LANG_MNEMOOPS_H
