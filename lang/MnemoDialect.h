//===- MnemoDialect.h - The mnemo dialect -----------------------*- C++ -*-===//

#ifndef MNEMO_LANG_MNEMODIALECT_H
#define MNEMO_LANG_MNEMODIALECT_H

#include "mlir/IR/Dialect.h"

#include "lang/MnemoOpsDialect.h.inc"

#endif // MNEMO_LANG_MNEMODIALECT_H
