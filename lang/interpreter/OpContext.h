//===- OpContext.h - What an op family's interpreter model sees -*- C++ -*-===//
//
// The reference interpreter's op families (lang/ops/*/...Interpreter.cpp)
// evaluate their ops through this view of the running evaluation: the
// operands' current values, the results to set (rounded there to their
// element types) and the options. The evaluator (Interpreter.cpp)
// implements it.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_INTERPRETER_OPCONTEXT_H
#define MNEMO_LANG_INTERPRETER_OPCONTEXT_H

// registerFamilyInterpreterModels: attaches every op family's interpreter
// model (InterpretedOpInterface), the register*Models function of each
// lang/ops/*/*Interpreter.cpp; attaching again changes nothing.
// lang/CMakeLists.txt generates it.
#include "lang/FamilyInterpreterModels.h"
#include "lang/MnemoInterfaces.h"
#include "lang/interpreter/Interpreter.h"
#include "lang/interpreter/Tensor.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/Twine.h"

#include <cmath>
#include <optional>

namespace mnemo::interp {

/// The reference's math policy for the families' formulas (the M of
/// `template <typename T, typename M>`): the C library in double, where
/// the backends use f32 and ElementwiseFormulas.h's FastMath.
struct ExactMath {
  static double exp(double x) { return std::exp(x); }
  static double tanh(double x) { return std::tanh(x); }
  static double log(double x) { return std::log(x); }
  static double log1p(double x) { return std::log1p(x); }
  static double erf(double x) { return std::erf(x); }
  static double sqrt(double x) { return std::sqrt(x); }
  static double sin(double x) { return std::sin(x); }
  static double cos(double x) { return std::cos(x); }
  static double pow(double x, double y) { return std::pow(x, y); }
};

class OpContext {
public:
  virtual ~OpContext() = default;
  /// `v`'s current value. The reference stays valid while the op runs.
  virtual const Tensor &get(mlir::Value v) = 0;
  /// A zero tensor of `v`'s type.
  virtual Tensor like(mlir::Value v) = 0;
  /// Stores a result, rounded to its element type.
  virtual void set(mlir::Value v, Tensor t) = 0;
  /// Stores a model's last result and returns success.
  mlir::LogicalResult finish(mlir::Value v, Tensor t) {
    set(v, std::move(t));
    return mlir::success();
  }
  /// Records why `op` cannot be evaluated; returns failure.
  virtual mlir::LogicalResult fail(mlir::Operation *op,
                                   const llvm::Twine &message) = 0;
  virtual const InterpreterOptions &options() const = 0;
  /// Arena mode, for a view the plan gave no bytes of its own (a strided
  /// transpose): every read of `view` is `source`'s current value with its
  /// dimensions permuted.
  virtual void readThrough(mlir::Value view, mlir::Value source,
                           llvm::ArrayRef<int64_t> permutation) = 0;
};

/// The interpreter model of an op whose evaluation is a function of its
/// own type: `InterpreterFunction<Op, interpret>::attach(context)` instead
/// of an external model written out.
template <typename Op, mlir::LogicalResult (*Interpret)(Op, OpContext &)>
struct InterpreterFunction
    : InterpretedOpInterface::ExternalModel<InterpreterFunction<Op, Interpret>,
                                            Op> {
  mlir::LogicalResult interpret(mlir::Operation *op, OpContext &context) const {
    return Interpret(llvm::cast<Op>(op), context);
  }
  static void attach(mlir::MLIRContext &context) {
    Op::template attachInterface<InterpreterFunction>(context);
  }
};

/// The elementwise family (lang/ops/elementwise/ElementwiseInterpreter.cpp):
/// every op with the FusionElementwise trait.
mlir::LogicalResult interpretElementwise(mlir::Operation *op,
                                         OpContext &context);

/// The operand and constant counts of ElementwiseFormulas.h's formula
/// `name`; none if there is no such formula (the op-completeness test).
struct FormulaArity {
  int operands = 0, constants = 0;
};
std::optional<FormulaArity> elementwiseFormulaArity(llvm::StringRef name);

} // namespace mnemo::interp

#endif // MNEMO_LANG_INTERPRETER_OPCONTEXT_H
