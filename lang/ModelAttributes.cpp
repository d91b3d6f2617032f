//===- ModelAttributes.cpp - The model's description in the IR ------------===//

#include "lang/ModelAttributes.h"

using namespace mlir;
using namespace mnemo;

/// Where each attribute sits, spelled once.
// On a step function's arguments and results.
static constexpr llvm::StringLiteral kRole = "mnemo.role";
static constexpr llvm::StringLiteral kName = "mnemo.name";
static constexpr llvm::StringLiteral kInit = "mnemo.init";
// On the module.
static constexpr llvm::StringLiteral kModel = "mnemo.model";
static constexpr llvm::StringLiteral kHyperparams = "mnemo.hyperparams";
static constexpr llvm::StringLiteral kTrain = "mnemo.train";
static constexpr llvm::StringLiteral kPrecision = "mnemo.precision";
static constexpr llvm::StringLiteral kUserError = "mnemo.user_error";
// On the evaluation step.
static constexpr llvm::StringLiteral kDenseWeightBytes =
    "mnemo.dense_weight_bytes";
// On a fake_quant op.
static constexpr llvm::StringLiteral kObserver = "mnemo.observer";
static constexpr llvm::StringLiteral kAveragingConstant = "averaging_constant";

std::optional<ArgumentRole> model::argumentRole(func::FuncOp func,
                                                unsigned index) {
  auto role = func.getArgAttrOfType<StringAttr>(index, kRole);
  ArgumentRole parsed;
  if (!role || !parseArgumentRole(role.getValue().str().c_str(), parsed))
    return std::nullopt;
  return parsed;
}

StringRef model::argumentName(func::FuncOp func, unsigned index) {
  auto name = func.getArgAttrOfType<StringAttr>(index, kName);
  return name ? name.getValue() : StringRef();
}

DictionaryAttr model::argumentInit(func::FuncOp func, unsigned index) {
  return func.getArgAttrOfType<DictionaryAttr>(index, kInit);
}

DictionaryAttr model::argumentAttrs(Builder &builder, ArgumentRole role,
                                    StringRef name, DictionaryAttr init) {
  SmallVector<NamedAttribute, 3> entries{
      builder.getNamedAttr(kRole,
                           builder.getStringAttr(argumentRoleName(role))),
      builder.getNamedAttr(kName, builder.getStringAttr(name))};
  if (init)
    entries.push_back(builder.getNamedAttr(kInit, init));
  return builder.getDictionaryAttr(entries);
}

StringRef model::resultName(func::FuncOp func, unsigned index) {
  auto name = func.getResultAttrOfType<StringAttr>(index, kName);
  return name ? name.getValue() : StringRef();
}

NamedAttribute model::resultNameAttr(Builder &builder, StringRef name) {
  return builder.getNamedAttr(kName, builder.getStringAttr(name));
}

StringRef model::modelName(ModuleOp module) {
  auto name = module->getAttrOfType<StringAttr>(kModel);
  return name ? name.getValue() : StringRef();
}

void model::setModelName(ModuleOp module, StringRef name) {
  module->setAttr(kModel, StringAttr::get(module.getContext(), name));
}

DictionaryAttr model::hyperparams(ModuleOp module) {
  return module->getAttrOfType<DictionaryAttr>(kHyperparams);
}

void model::setHyperparams(ModuleOp module, DictionaryAttr settings) {
  module->setAttr(kHyperparams, settings);
}

DictionaryAttr model::trainSettings(ModuleOp module) {
  return module->getAttrOfType<DictionaryAttr>(kTrain);
}

void model::setTrainSettings(ModuleOp module, DictionaryAttr settings) {
  module->setAttr(kTrain, settings);
}

StringRef model::precision(ModuleOp module) {
  auto chosen = module->getAttrOfType<StringAttr>(kPrecision);
  return chosen ? chosen.getValue() : StringRef("f32");
}

void model::setPrecision(ModuleOp module, StringRef precision) {
  module->setAttr(kPrecision, StringAttr::get(module.getContext(), precision));
}

bool model::hasUserError(ModuleOp module) {
  return module->hasAttr(kUserError);
}

void model::markUserError(ModuleOp module) {
  module->setAttr(kUserError, UnitAttr::get(module.getContext()));
}

std::optional<int64_t> model::denseWeightBytes(func::FuncOp eval) {
  if (auto bytes = eval->getAttrOfType<IntegerAttr>(kDenseWeightBytes))
    return bytes.getInt();
  return std::nullopt;
}

void model::setDenseWeightBytes(func::FuncOp eval, int64_t bytes) {
  eval->setAttr(
      kDenseWeightBytes,
      IntegerAttr::get(IntegerType::get(eval.getContext(), 64), bytes));
}

std::optional<double> model::observerAveraging(Operation *fakeQuant) {
  auto observer = fakeQuant->getAttrOfType<DictionaryAttr>(kObserver);
  if (!observer)
    return std::nullopt;
  return observer.getAs<FloatAttr>(kAveragingConstant).getValueAsDouble();
}

void model::setObserverAveraging(Operation *fakeQuant, double averaging) {
  Builder builder(fakeQuant->getContext());
  fakeQuant->setAttr(
      kObserver, builder.getDictionaryAttr(builder.getNamedAttr(
                     kAveragingConstant, builder.getF64FloatAttr(averaging))));
}

void model::clearObserver(Operation *fakeQuant) {
  fakeQuant->removeAttr(kObserver);
}

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

bool model::isModelAttribute(NamedAttribute attr) {
  return llvm::is_contained({kRole, kName, kInit, kModel, kHyperparams, kTrain,
                             kPrecision, kUserError, kDenseWeightBytes,
                             kObserver},
                            attr.getName().getValue());
}

/// `attr` is of kind `Kind`, or an error naming what it must be.
template <typename Kind>
static LogicalResult expectKind(Operation *op, NamedAttribute attr,
                                StringRef where, StringRef what) {
  if (llvm::isa<Kind>(attr.getValue()))
    return success();
  return op->emitError() << where << "'" << attr.getName().getValue()
                         << "' must be " << what;
}

LogicalResult model::verifyOperationAttribute(Operation *op,
                                              NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kModel)
    return expectKind<StringAttr>(op, attr, "", "a string");
  if (name == kHyperparams || name == kTrain)
    return expectKind<DictionaryAttr>(op, attr, "", "a dictionary");
  if (name == kUserError)
    return expectKind<UnitAttr>(op, attr, "", "a unit attribute");
  if (name == kDenseWeightBytes)
    return expectKind<IntegerAttr>(op, attr, "", "an integer");
  if (name == kPrecision) {
    auto chosen = llvm::dyn_cast<StringAttr>(attr.getValue());
    if (!chosen ||
        !llvm::is_contained({"f32", "bf16", "f16"}, chosen.getValue()))
      return op->emitError()
             << "'" << name << "' must be \"f32\", \"bf16\" or \"f16\"";
    return success();
  }
  if (name == kObserver) {
    auto observer = llvm::dyn_cast<DictionaryAttr>(attr.getValue());
    if (!observer || !observer.getAs<FloatAttr>(kAveragingConstant))
      return op->emitError() << "'" << name << "' must be a dictionary with a "
                             << "float '" << kAveragingConstant << "'";
    return success();
  }
  if (name == kRole || name == kName || name == kInit)
    return op->emitError() << "'" << name
                           << "' belongs on a function's arguments";
  return success();
}

LogicalResult model::verifyArgumentAttribute(Operation *op, unsigned index,
                                             NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  std::string where = "argument " + std::to_string(index) + "'s ";
  if (name == kRole) {
    auto role = llvm::dyn_cast<StringAttr>(attr.getValue());
    ArgumentRole parsed;
    if (!role || !parseArgumentRole(role.getValue().str().c_str(), parsed)) {
      InFlightDiagnostic error = op->emitError()
                                 << where << "'" << name << "' must be one of";
      for (int r = 0; r < kArgumentRoleCount; ++r)
        error << (r ? ", " : " ") << argumentRoleName(ArgumentRole(r));
      return error;
    }
    return success();
  }
  if (name == kName)
    return expectKind<StringAttr>(op, attr, where, "a string");
  if (name == kInit)
    return expectKind<DictionaryAttr>(op, attr, where, "a dictionary");
  return success();
}

LogicalResult model::verifyResultAttribute(Operation *op, unsigned index,
                                           NamedAttribute attr) {
  if (attr.getName().getValue() == kName)
    return expectKind<StringAttr>(
        op, attr, "result " + std::to_string(index) + "'s ", "a string");
  return success();
}
