//===- ElementwiseInterpreter.cpp - The elementwise ops, interpreted -----===//
//
// The reference interpreter's model of the elementwise family: each formula
// op through ElementwiseFormulas.h in double with the C library's functions
// (OpContext.h's ExactMath), where the backends use f32 and FastMath; the
// operators, casts, selections and dropout written out here.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/elementwise/ElementwiseFormulas.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <utility>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// A formula called with its operands' and constants' values in one array.
template <typename... Args, size_t... I>
double apply(double (*formula)(Args...), const double *values,
             std::index_sequence<I...>) {
  return formula(values[I]...);
}

struct FormulaRow {
  StringRef name;
  FormulaArity arity;
  double (*evaluate)(const double *values);
};

#define MNEMO_FORMULA_ROW(NAME, OPERANDS, CONSTANTS)                           \
  {#NAME, {OPERANDS, CONSTANTS}, [](const double *values) {                    \
     return apply(&elementwise::NAME<double, ExactMath>, values,               \
                  std::make_index_sequence<OPERANDS + CONSTANTS>());           \
   }},
const FormulaRow kFormulas[] = {MNEMO_ELEMENTWISE_FORMULAS(MNEMO_FORMULA_ROW)};
#undef MNEMO_FORMULA_ROW

const FormulaRow *findFormula(StringRef name) {
  for (const FormulaRow &row : kFormulas)
    if (row.name == name)
      return &row;
  return nullptr;
}

LogicalResult interpretFormula(ElementwiseFormulaOpInterface op,
                               OpContext &context) {
  Operation *operation = op.getOperation();
  const FormulaRow *row = findFormula(op.getFormulaName());
  SmallVector<double> constants = op.getFormulaConstants();
  unsigned operands = operation->getNumOperands();
  if (!row || row->arity.operands != int(operands) ||
      row->arity.constants != int(constants.size()))
    return context.fail(operation, "internal error: no formula '" +
                                       op.getFormulaName() + "' with " +
                                       Twine(operands) + " operands and " +
                                       Twine(constants.size()) +
                                       " constants in ElementwiseFormulas.h");
  SmallVector<const Tensor *> inputs;
  for (Value operand : operation->getOperands())
    inputs.push_back(&context.get(operand));
  Tensor out = context.like(operation->getResult(0));
  SmallVector<double> values(operands + constants.size());
  llvm::copy(constants, values.begin() + operands);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    for (unsigned k = 0; k < operands; ++k)
      values[k] = inputs[k]->data[i];
    out.data[i] = row->evaluate(values.data());
  }
  return context.finish(operation->getResult(0), std::move(out));
}

template <typename Fn>
LogicalResult interpretBinary(Operation *op, OpContext &context, Fn fn) {
  const Tensor &x = context.get(op->getOperand(0));
  const Tensor &y = context.get(op->getOperand(1));
  Tensor out = context.like(op->getResult(0));
  for (int64_t i = 0; i < x.numElements(); ++i)
    out.data[i] = fn(x.data[i], y.data[i]);
  return context.finish(op->getResult(0), std::move(out));
}

} // namespace

std::optional<FormulaArity> interp::elementwiseFormulaArity(StringRef name) {
  if (const FormulaRow *row = findFormula(name))
    return row->arity;
  return std::nullopt;
}

LogicalResult interp::interpretElementwise(Operation *op, OpContext &context) {
  if (auto formula = llvm::dyn_cast<ElementwiseFormulaOpInterface>(op))
    return interpretFormula(formula, context);
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](AddOp) {
        return interpretBinary(op, context,
                               [](double a, double b) { return a + b; });
      })
      .Case([&](SubOp) {
        return interpretBinary(op, context,
                               [](double a, double b) { return a - b; });
      })
      .Case([&](MulOp) {
        return interpretBinary(op, context,
                               [](double a, double b) { return a * b; });
      })
      .Case([&](DivOp d) {
        bool isInt = !isFloat(elementTypeOf(d.getType()));
        if (isInt)
          for (double y : context.get(d.getRhs()).data)
            if (y == 0)
              return context.fail(op, "integer division by zero");
        return interpretBinary(op, context, [isInt](double a, double b) {
          return isInt ? std::trunc(a / b) : a / b;
        });
      })
      .Case([&](CastOp c) {
        // set() rounds (or truncates) to the result's type.
        Tensor out = context.get(c.getInput());
        return context.finish(c.getResult(), std::move(out));
      })
      .Case([&](WhereOp w) {
        const Tensor &c = context.get(w.getCondition()),
                     &a = context.get(w.getOnTrue()),
                     &b = context.get(w.getOnFalse());
        Tensor out = context.like(w.getResult());
        for (int64_t i = 0; i < out.numElements(); ++i)
          out.data[i] = c.data[i] != 0 ? a.data[i] : b.data[i];
        return context.finish(w.getResult(), std::move(out));
      })
      .Case([&](CompareOp c) {
        StringRef predicate = c.getPredicate();
        const Tensor &a = context.get(c.getLhs()), &b = context.get(c.getRhs());
        Tensor out = context.like(c.getResult());
        for (int64_t i = 0; i < out.numElements(); ++i) {
          double x = a.data[i], y = b.data[i];
          bool holds = predicate == "eq"   ? x == y
                       : predicate == "ne" ? x != y
                       : predicate == "lt" ? x < y
                       : predicate == "le" ? x <= y
                       : predicate == "gt" ? x > y
                                           : x >= y;
          out.data[i] = holds ? 1.0 : 0.0;
        }
        return context.finish(c.getResult(), std::move(out));
      })
      .Case([&](LogicalOp l) {
        StringRef kind = l.getKind();
        const Tensor &a = context.get(l.getInputs()[0]);
        const Tensor *b =
            kind == "not" ? nullptr : &context.get(l.getInputs()[1]);
        Tensor out = context.like(l.getResult());
        for (int64_t i = 0; i < out.numElements(); ++i) {
          bool x = a.data[i] != 0, y = b && b->data[i] != 0;
          bool holds = kind == "and"   ? x && y
                       : kind == "or"  ? x || y
                       : kind == "xor" ? x != y
                                       : !x;
          out.data[i] = holds ? 1.0 : 0.0;
        }
        return context.finish(l.getResult(), std::move(out));
      })
      .Case([&](DropoutOp d) {
        double p = d.getP().convertToDouble();
        int64_t seed = d.getSeed(), step = context.options().dropoutStep;
        const Tensor &x = context.get(d.getInput());
        Tensor out = context.like(d.getResult());
        for (int64_t i = 0; i < x.numElements(); ++i)
          out.data[i] = elementwise::dropoutUniform(seed, step, i) < p
                            ? 0.0
                            : x.data[i] / (1.0 - p);
        return context.finish(d.getResult(), std::move(out));
      })
      .Default([&](Operation *) {
        return context.fail(op, "internal error: an elementwise op without a "
                                "formula or a rule of its own");
      });
}

namespace {
/// The family's model, attached to every op with the FusionElementwise
/// trait: the trait is what makes an op this family's.
struct ElementwiseInterpreterModel
    : InterpretedOpInterface::FallbackModel<ElementwiseInterpreterModel> {
  LogicalResult interpret(Operation *op, OpContext &context) const {
    return interpretElementwise(op, context);
  }
};
} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerElementwiseInterpreterModels(MLIRContext &context) {
  for (RegisteredOperationName op : context.getRegisteredOperations())
    if (op.hasTrait<FusionElementwise>())
      op.attachInterface<ElementwiseInterpreterModel>();
}
