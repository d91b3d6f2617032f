//===- Amp.cpp - Mixed precision as a compiler pass -----------------------===//
//
// See Passes.td (Amp) for the policy. The pass walks @forward once, in
// order: it decides each op's compute type from its category and its
// operands, casts the operands that differ, and retypes the op's float
// results. Which values are "weight-like" (parameters, constants, and what
// is computed from them alone) is tracked along the way: they follow the
// activation they meet instead of promoting it.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "lang/MnemoOps.h"
#include "lang/ModelAttributes.h"
#include "passes/SourcePlace.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

namespace mnemo {
#define GEN_PASS_DEF_AMP
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

enum class Category { Low, F32, Follow };

struct Policy {
  /// The --amp-policy file's moves, by op name; every other op keeps the
  /// category its definition declares (PyTorch autocast's lists, as traits
  /// of the ops: MnemoInterfaces.td).
  llvm::StringMap<Category> categories;
  std::vector<std::string> keepF32;

  Category of(Operation *op) const {
    auto it = categories.find(op->getName().stripDialect());
    if (it != categories.end())
      return it->second;
    if (op->hasTrait<AmpLowPrecision>())
      return Category::Low;
    if (op->hasTrait<AmpF32>())
      return Category::F32;
    return Category::Follow;
  }
  /// Whether the op belongs to a layer kept in f32: its innermost layer
  /// name is an entry or lies under one ("blocks.0" keeps
  /// "blocks.0.attn.wq").
  bool keptInF32(Operation *op) const {
    if (keepF32.empty())
      return false;
    std::string layer = sourcePlaceOf(op->getLoc()).layer;
    for (const std::string &entry : keepF32)
      if (layer == entry || (layer.size() > entry.size() &&
                             StringRef(layer).starts_with(entry + ".")))
        return true;
    return false;
  }
};

bool isFloatTensor(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  return t && llvm::isa<FloatType>(t.getElementType());
}

Type elementOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getElementType();
}

Type withElement(Value v, Type element) {
  return llvm::cast<RankedTensorType>(v.getType()).clone(element);
}

/// The wider of two float types (f32 beats bf16 and f16; bf16 and f16
/// together widen to f32).
Type wider(Type a, Type b) {
  if (!a)
    return b;
  if (!b || a == b)
    return a;
  unsigned wa = a.getIntOrFloatBitWidth(), wb = b.getIntOrFloatBitWidth();
  if (wa != wb)
    return wa > wb ? a : b;
  return Float32Type::get(a.getContext());
}

struct AmpPass : public mnemo::impl::AmpBase<AmpPass> {
  using AmpBase::AmpBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    DictionaryAttr settings = model::trainSettings(module);
    std::string chosen = precision;
    if (chosen.empty() && settings)
      if (auto p = settings.getAs<StringAttr>("precision"))
        chosen = p.getValue().str();
    if (chosen == "fp32")
      chosen = "f32";
    if (chosen == "fp16")
      chosen = "f16";
    Policy policy;
    if (settings)
      if (auto keep = settings.getAs<ArrayAttr>("keep_f32"))
        for (Attribute a : keep)
          if (auto s = llvm::dyn_cast<StringAttr>(a))
            policy.keepF32.push_back(s.getValue().str());
    // Read in f32 too, where it changes nothing, so that a wrong path or a
    // malformed policy is reported when it is given.
    if (!policyFile.empty() && failed(readPolicy(policy))) {
      model::markUserError(getOperation());
      return signalPassFailure();
    }
    if (chosen.empty() || chosen == "f32" || !forward)
      return;
    Type low;
    if (chosen == "bf16")
      low = BFloat16Type::get(&getContext());
    else if (chosen == "f16")
      low = Float16Type::get(&getContext());
    else {
      optionError("--precision")
          << "--precision must be f32, bf16 or f16, not '" << chosen << "'";
      model::markUserError(getOperation());
      return signalPassFailure();
    }
    // The precision actually applied, for the memory report and the trainer.
    model::setPrecision(module, chosen);
    convert(forward, policy, low);
  }

  /// An error in a command-line option, not in the model file: it points
  /// at the option (tools/driver prints it as the option's own error).
  InFlightDiagnostic optionError(StringRef option) {
    return emitError(NameLoc::get(StringAttr::get(&getContext(), option)));
  }

  LogicalResult readPolicy(Policy &policy) {
    auto buffer = llvm::MemoryBuffer::getFile(policyFile);
    if (!buffer) {
      optionError("--amp-policy")
          << "cannot read the mixed-precision policy '" << policyFile
          << "': " << buffer.getError().message();
      return failure();
    }
    llvm::Expected<llvm::json::Value> json =
        llvm::json::parse((*buffer)->getBuffer());
    auto *object = json ? json->getAsObject() : nullptr;
    if (!object) {
      if (!json)
        llvm::consumeError(json.takeError());
      optionError("--amp-policy")
          << "the mixed-precision policy '" << policyFile
          << "' is not a JSON object of lists (low, f32, follow, keep_f32)";
      return failure();
    }
    for (auto &[key, value] : *object) {
      auto *list = value.getAsArray();
      std::optional<Category> category;
      if (key == "low")
        category = Category::Low;
      else if (key == "f32")
        category = Category::F32;
      else if (key == "follow")
        category = Category::Follow;
      else if (key != "keep_f32")
        list = nullptr;
      if (!list) {
        optionError("--amp-policy")
            << "the mixed-precision policy '" << policyFile << "': '"
            << key.str() << "' is not one of low, f32, follow, keep_f32 "
            << "with a list of names";
        return failure();
      }
      for (const llvm::json::Value &item : *list) {
        std::optional<StringRef> name = item.getAsString();
        if (!name) {
          optionError("--amp-policy")
              << "the mixed-precision policy '" << policyFile << "': '"
              << key.str() << "' must list names";
          return failure();
        }
        StringRef op =
            name->starts_with("mnemo.") ? name->drop_front(6) : *name;
        if (category)
          policy.categories[op] = *category;
        else
          policy.keepF32.push_back(name->str());
      }
    }
    return success();
  }

  void convert(func::FuncOp forward, const Policy &policy, Type low) {
    Type f32 = Float32Type::get(&getContext());
    Block &body = forward.getBody().front();
    // Parameters, constants and what only they compute.
    llvm::DenseSet<Value> weightLike;
    for (BlockArgument arg : body.getArguments())
      if (model::argumentRole(forward, arg.getArgNumber()) ==
          ArgumentRole::Param)
        weightLike.insert(arg);
    // Results this pass gave another type.
    llvm::DenseSet<Value> retyped;
    OpBuilder builder(&getContext());
    for (Operation &op :
         llvm::make_early_inc_range(body.without_terminator())) {
      bool allWeightLike = true;
      for (Value operand : op.getOperands())
        allWeightLike = allWeightLike && weightLike.contains(operand);
      if (allWeightLike) {
        for (Value r : op.getResults())
          weightLike.insert(r);
        // Weights stay f32 until an activation needs them (a cast there),
        // or an op that computes in low precision (a product of weights,
        // as an RNN's first step multiplies its constant initial state).
        // What reads such a product is typed by the rules below, as any
        // op: left alone, a bias added to it would mix bf16 and f32.
        bool readsRetyped = llvm::any_of(
            op.getOperands(), [&](Value v) { return retyped.contains(v); });
        if (!op.hasTrait<AmpLowPrecision>() && !readsRetyped)
          continue;
      }
      bool floatResults = llvm::any_of(op.getResults(), isFloatTensor);
      if (!floatResults)
        continue;
      Category category = policy.of(&op);
      if (category != Category::F32 && policy.keptInF32(&op))
        category = Category::F32;
      // Only the first operand is cast where the others stay f32 (batch
      // norm's scale and bias); following, the op computes in its type.
      bool castFirstOnly = op.hasTrait<AmpParametersStayF32>();
      Type compute;
      if (category == Category::Low) {
        compute = low;
      } else if (category == Category::F32) {
        compute = f32;
      } else if (castFirstOnly) {
        if (!isFloatTensor(op.getOperand(0)))
          continue;
        compute = elementOf(op.getOperand(0));
      } else {
        Type activations, all;
        for (Value operand : op.getOperands()) {
          if (!isFloatTensor(operand))
            continue;
          all = wider(all, elementOf(operand));
          if (!weightLike.contains(operand))
            activations = wider(activations, elementOf(operand));
        }
        compute = activations ? activations : all;
        if (!compute)
          continue;
      }
      builder.setInsertionPoint(&op);
      for (OpOperand &operand : op.getOpOperands()) {
        Value v = operand.get();
        if (!isFloatTensor(v) || elementOf(v) == compute ||
            (castFirstOnly && operand.getOperandNumber() > 0))
          continue;
        operand.set(
            builder.create<CastOp>(op.getLoc(), withElement(v, compute), v));
      }
      for (Value r : op.getResults())
        if (isFloatTensor(r) && elementOf(r) != compute &&
            !(op.hasTrait<AmpStatisticsStayF32>() && r != op.getResult(0)) &&
            !op.hasTrait<AmpResultsStayF32>()) {
          r.setType(withElement(r, compute));
          retyped.insert(r);
        }
    }
    // The function's results keep their declared types.
    Operation *ret = body.getTerminator();
    builder.setInsertionPoint(ret);
    FunctionType type = forward.getFunctionType();
    for (auto [i, operand] : llvm::enumerate(ret->getOpOperands()))
      if (operand.get().getType() != type.getResult(i))
        operand.set(builder.create<CastOp>(ret->getLoc(), type.getResult(i),
                                           operand.get()));
  }
};

} // namespace
