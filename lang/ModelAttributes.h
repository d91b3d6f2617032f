//===- ModelAttributes.h - The model's description in the IR ----*- C++ -*-===//
//
// The one library through which the model's own attributes are written and
// read: what each step argument is (its role, its name, its initializer),
// the names of the step results, and what the module says of the model as a
// whole (its name, hyperparameters, train settings, chosen precision). No
// other file spells these "mnemo.*" attribute names; the dialect's verifiers
// (MnemoDialect::verifyOperationAttribute and friends) call the verifier
// below, so a hand-written module with a misspelled role or a non-string
// name fails to parse instead of misleading a pass. The memory plan's
// attributes have their own library, lang/PlanAttributes.h.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_MODELATTRIBUTES_H
#define MNEMO_LANG_MODELATTRIBUTES_H

#include "runtime/ArgumentRole.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace mnemo::model {

//===--- Step arguments and results ---------------------------------------===//

/// The role of argument `index` (none when the argument has no role, or
/// the module was not made by Mnemo).
std::optional<ArgumentRole> argumentRole(mlir::func::FuncOp func,
                                         unsigned index);
/// The name of argument `index` ("" when it has none).
llvm::StringRef argumentName(mlir::func::FuncOp func, unsigned index);
/// A parameter's initializer as the model states it (null for other
/// arguments).
mlir::DictionaryAttr argumentInit(mlir::func::FuncOp func, unsigned index);
/// An argument's attribute dictionary: its role, its name and, for state
/// that starts from a value, its initializer.
mlir::DictionaryAttr argumentAttrs(mlir::Builder &builder, ArgumentRole role,
                                   llvm::StringRef name,
                                   mlir::DictionaryAttr init = {});

/// The name of result `index` ("" when it has none): loss, output, an
/// updated parameter's name, lr, grad_norm.
llvm::StringRef resultName(mlir::func::FuncOp func, unsigned index);
/// The attribute naming a result, for building result dictionaries.
mlir::NamedAttribute resultNameAttr(mlir::Builder &builder,
                                    llvm::StringRef name);

//===--- The module -------------------------------------------------------===//

/// The model's name, as its `model` declaration gives it ("" when none).
llvm::StringRef modelName(mlir::ModuleOp module);
void setModelName(mlir::ModuleOp module, llvm::StringRef name);

/// The model's hyperparameters (null when none were declared).
mlir::DictionaryAttr hyperparams(mlir::ModuleOp module);
void setHyperparams(mlir::ModuleOp module, mlir::DictionaryAttr settings);

/// The model's `train` section (null for an inference-only model).
mlir::DictionaryAttr trainSettings(mlir::ModuleOp module);
void setTrainSettings(mlir::ModuleOp module, mlir::DictionaryAttr settings);

/// The precision the amp pass chose: "f32" before it ran, else "bf16" or
/// "f16".
llvm::StringRef precision(mlir::ModuleOp module);
void setPrecision(mlir::ModuleOp module, llvm::StringRef precision);

/// A pass met an error in what the user wrote (rather than a compiler
/// bug): mnemoc exits 1 without asking for a bug report.
bool hasUserError(mlir::ModuleOp module);
void markUserError(mlir::ModuleOp module);

/// The bytes the evaluation step's weights take before compress-weights
/// packed them (none when they were not packed), for the memory report.
std::optional<int64_t> denseWeightBytes(mlir::func::FuncOp eval);
void setDenseWeightBytes(mlir::func::FuncOp eval, int64_t bytes);

//===--- Ops --------------------------------------------------------------===//

/// qat's request that training observe the fake-quantized tensor's range
/// with this moving-average constant (none when the op is not observed,
/// as in evaluation). Autodiff builds the observer and drops the mark.
std::optional<double> observerAveraging(mlir::Operation *fakeQuant);
void setObserverAveraging(mlir::Operation *fakeQuant, double averaging);
void clearObserver(mlir::Operation *fakeQuant);

//===--- Verification -----------------------------------------------------===//

/// Whether `attr` is a model attribute (one of the names above).
bool isModelAttribute(mlir::NamedAttribute attr);
/// The checks of a model attribute on `op`, on one of its function's
/// arguments or on one of its results.
mlir::LogicalResult verifyOperationAttribute(mlir::Operation *op,
                                             mlir::NamedAttribute attr);
mlir::LogicalResult verifyArgumentAttribute(mlir::Operation *op, unsigned index,
                                            mlir::NamedAttribute attr);
mlir::LogicalResult verifyResultAttribute(mlir::Operation *op, unsigned index,
                                          mlir::NamedAttribute attr);

} // namespace mnemo::model

#endif // MNEMO_LANG_MODELATTRIBUTES_H
