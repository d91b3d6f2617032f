//===- MnemoOps.td - The Mnemo op set ----------------------*- tablegen -*-===//
//
// The Mnemo op set: every op family's ODS (lang/ops/FAMILY/FAMILYOps.td, the
// one definition of each of its ops), as lang/CMakeLists.txt lists them.
// Shapes are checked by the families' verifiers through lang/ShapeRules.h,
// which the frontend shares.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_OPS_TD
#define MNEMO_OPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

include "lang/MnemoFamilies.td"

#endif // MNEMO_OPS_TD
