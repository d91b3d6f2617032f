//===- MnemoDialect.cpp - The mnemo dialect -------------------------------===//

#include "lang/MnemoDialect.h"
#include "lang/MnemoOps.h"

using namespace mlir;
using namespace mnemo;

#include "lang/MnemoOpsDialect.cpp.inc"

void MnemoDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "lang/MnemoOps.cpp.inc"
      >();
  registerAttributes();
}

Operation *MnemoDialect::materializeConstant(OpBuilder &builder,
                                             Attribute value, Type type,
                                             Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}
