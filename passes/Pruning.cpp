//===- Pruning.cpp - The train section's `prune` directives as mnemo IR ---===//

#include "passes/Pruning.h"
#include "lang/MnemoOps.h"
#include "lang/ShapeRules.h"
#include "passes/TrainSettings.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mnemo;

/// Why `method` cannot prune a parameter of `type`, or "" when it can.
static std::string unprunable(DictionaryAttr settings, RankedTensorType type) {
  if (!type.getElementType().isF32()) {
    std::string why;
    llvm::raw_string_ostream(why)
        << "pruning needs an f32 parameter, not " << type;
    return why;
  }
  return shape::pruneProblem(
      settingText(settings, "kind", "").str(), shape::Shape(type.getShape()),
      settingInt(settings, "dim", 0), settingInt(settings, "n", 2),
      settingInt(settings, "m", 4));
}

FailureOr<Pruning> Pruning::fromSettings(DictionaryAttr train,
                                         ArrayRef<StringRef> names,
                                         ArrayRef<Type> types,
                                         ArrayRef<Location> locs) {
  Pruning pruning;
  pruning.directiveOf.assign(names.size(), -1);
  auto list = train ? train.getAs<ArrayAttr>("prune") : ArrayAttr();
  if (!list)
    return pruning;
  bool ok = true;
  for (Attribute entry : list) {
    auto settings = llvm::cast<DictionaryAttr>(entry);
    Directive directive{settings, {}};
    for (Attribute p : settings.getAs<ArrayAttr>("params")) {
      StringRef want = llvm::cast<StringAttr>(p).getValue();
      for (unsigned k = 0; k < names.size(); ++k) {
        if (names[k] != want)
          continue;
        std::string why =
            unprunable(settings, llvm::cast<RankedTensorType>(types[k]));
        if (!why.empty()) {
          emitError(locs[k]) << "cannot prune '" << want << "': " << why;
          ok = false;
        }
        pruning.directiveOf[k] = int(pruning.directives.size());
        directive.params.push_back(k);
      }
    }
    if (!directive.params.empty())
      pruning.directives.push_back(directive);
  }
  if (!ok)
    return failure();
  return pruning;
}

Type Pruning::maskType(Type paramType) const {
  auto type = llvm::cast<RankedTensorType>(paramType);
  return RankedTensorType::get({(type.getNumElements() + 31) / 32},
                               IntegerType::get(type.getContext(), 32));
}

SmallVector<Value> Pruning::maskedChain(Value updated) {
  SmallVector<Value> chain{updated};
  while (auto mask = chain.back().getDefiningOp<ApplyMaskOp>()) {
    if (!mask.getInput().getDefiningOp())
      break;
    chain.push_back(mask.getInput());
  }
  return chain;
}

Value Pruning::apply(OpBuilder &b, Location loc, Value value, Value mask,
                     Value when) {
  return b.create<ApplyMaskOp>(loc, value.getType(), value, mask, when);
}

SmallVector<Value> Pruning::updateMasks(OpBuilder &b, Location loc, Value step,
                                        ArrayRef<Value> params,
                                        ArrayRef<Value> masks,
                                        SmallVectorImpl<Value> &updated) const {
  SmallVector<Value> newMasks(params.size());
  updated.assign(params.size(), Value());
  for (const Directive &d : directives) {
    DictionaryAttr s = d.settings;
    StringRef method = settingText(s, "kind", "magnitude");
    // Per-layer magnitude pruning ranks each weight on its own: one op each.
    SmallVector<SmallVector<unsigned>> groups;
    if (method == "magnitude" && settingText(s, "scope", "layer") == "layer")
      for (unsigned k : d.params)
        groups.push_back({k});
    else
      groups.push_back(d.params);
    for (ArrayRef<unsigned> group : groups) {
      SmallVector<Value> weights, groupMasks;
      SmallVector<Type> types;
      for (unsigned k : group) {
        weights.push_back(params[k]);
        groupMasks.push_back(masks[k]);
        types.push_back(masks[k].getType());
      }
      auto op = b.create<PruneMasksOp>(
          loc, types, RankedTensorType::get({}, b.getI32Type()), step, weights,
          groupMasks, b.getStringAttr(method),
          b.getF64FloatAttr(settingNumber(s, "sparsity", 0)),
          b.getI64IntegerAttr(settingInt(s, "start", 0)),
          b.getI64IntegerAttr(settingInt(s, "end", 0)),
          b.getI64IntegerAttr(settingInt(s, "every", 100)),
          b.getStringAttr(settingText(s, "norm", "l2")),
          b.getI64IntegerAttr(settingInt(s, "dim", 0)),
          b.getI64IntegerAttr(settingInt(s, "n", 2)),
          b.getI64IntegerAttr(settingInt(s, "m", 4)));
      for (auto [k, result] : llvm::zip(group, op.getNewMasks())) {
        newMasks[k] = result;
        updated[k] = op.getUpdated();
      }
    }
  }
  return newMasks;
}
