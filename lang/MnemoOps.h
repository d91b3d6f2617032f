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

namespace mnemo {
namespace attention {
/// The attention ops' geometry (lang/ops/attention/AttentionFormulas.h,
/// which their users include).
struct AttentionGeometry;
} // namespace attention
namespace losses {
/// linear_cross_entropy's sizes and which of its passes a CUDA scratch
/// layout is for (lang/ops/losses/LossesKernels.h).
struct ClassifierGeometry;
enum class ClassifierPass : int;
} // namespace losses
} // namespace mnemo

#define GET_OP_CLASSES
#include "lang/MnemoOps.h.inc"

#endif // MNEMO_LANG_MNEMOOPS_H
