//===- ElementwiseEmission.cpp - The elementwise ops in fused loops ------===//
//
// The code generation model of the elementwise family, for both backends:
// the C expression of one element of an op, over its operands'
// expressions. A formula op is a call of its formula in
// ElementwiseFormulas.h (which the CPU kernels and the CUDA kernel library
// include) with its constants as f32 literals; the operators, casts,
// selections and dropout are written out here. The fused-loop builder
// (codegen/StepLayout.cpp) nests these expressions into one loop.
//
//===----------------------------------------------------------------------===//

#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

FailureOr<std::string> codegen::elementwiseExpression(Operation *op,
                                                      ArrayRef<std::string> x,
                                                      Loop &loop,
                                                      StepLayouts &layouts) {
  CType type = ctypeOf(op->getResult(0).getType());
  auto floatOnly = [&](std::string e) -> FailureOr<std::string> {
    if (!type.isFloat) {
      layouts.error(op, "this op needs a float type");
      return failure();
    }
    return e;
  };
  if (auto formula = llvm::dyn_cast<ElementwiseFormulaOpInterface>(op)) {
    // 16-bit values are computed in f32, so every formula is called in f32.
    std::string call =
        "mnemo::elementwise::" + formula.getFormulaName().str() + "(";
    llvm::ListSeparator comma;
    for (const std::string &operand : x)
      call += std::string(StringRef(comma)) + operand;
    for (double constant : formula.getFormulaConstants())
      call += std::string(StringRef(comma)) + floatLiteral(constant);
    return floatOnly(call + ")");
  }
  return llvm::TypeSwitch<Operation *, FailureOr<std::string>>(op)
      .Case([&](AddOp) { return x[0] + " + " + x[1]; })
      .Case([&](SubOp) { return x[0] + " - " + x[1]; })
      .Case([&](MulOp) { return x[0] + " * " + x[1]; })
      .Case([&](DivOp) { return x[0] + " / " + x[1]; })
      .Case([&](CastOp) -> FailureOr<std::string> {
        if (llvm::cast<ShapedType>(op->getResult(0).getType())
                .getElementType()
                .isInteger(1))
          return "(" + x[0] + " != 0 ? 1 : 0)";
        return "static_cast<" + (type.isHalf ? "float" : type.name) + ">(" +
               x[0] + ")";
      })
      .Case([&](WhereOp) { return x[0] + " ? " + x[1] + " : " + x[2]; })
      .Case([&](CompareOp c) {
        // Loaded values compare as values (16-bit ones are loaded as f32).
        StringRef predicate = c.getPredicate();
        const char *op = predicate == "eq"   ? " == "
                         : predicate == "ne" ? " != "
                         : predicate == "lt" ? " < "
                         : predicate == "le" ? " <= "
                         : predicate == "gt" ? " > "
                                             : " >= ";
        return "(" + x[0] + op + x[1] + " ? 1 : 0)";
      })
      .Case([&](LogicalOp l) {
        StringRef kind = l.getKind();
        if (kind == "not")
          return "(" + x[0] + " != 0 ? 0 : 1)";
        const char *op = kind == "and"  ? " && "
                         : kind == "or" ? " || "
                                        : " != ";
        return "((" + x[0] + " != 0)" + op + "(" + x[1] + " != 0) ? 1 : 0)";
      })
      .Case([&](DropoutOp d) {
        // The step comes from the trainer at run time (dropoutStep); the
        // element is the flat index of the loop.
        loop.usesDropout = true;
        double p = d.getP().convertToDouble();
        return floatOnly("mnemo::elementwise::dropoutUniform(" +
                         std::to_string(d.getSeed()) +
                         ", dropoutStep, {FLAT}) < " + doubleLiteral(p) +
                         " ? 0.0f : " + x[0] + " / " + floatLiteral(1.0 - p));
      })
      .Default([&](Operation *) -> FailureOr<std::string> {
        layouts.error(op, "internal error: an elementwise op without a "
                          "formula or a rule of its own");
        return failure();
      });
}
