//===- CompressWeights.cpp - Inference: compressed weights, no training ---===//
//
// See Passes.td (CompressWeights). The weights take the layouts
// `train --export` writes (runtime/Export.cpp), argument for tensor and
// under the same names, so that an export loads into the plan byte for
// byte:
//
//   quantized  <w> (i8 codes; int4: two per byte), <w>.scale, <w>.zero_point
//   2:4        <w> (kept values [N, K/2]), <w>.indices ([N, K/8])
//   CSR        <w>.values, <w>.columns, <w>.row_offsets
//
// A quantized weight that only feeds `x @ W^T` runs as an int8 GEMM; any
// other use reads it dequantized. Sparse layouts are chosen only where
// every use is such a product, and CSR only where the directive fixes the
// number of nonzeros (per-layer magnitude pruning: the plan is static) and
// it is smaller than the dense weight.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/TrainSettings.h"

#include "lang/MnemoOps.h"
#include "lang/ModelAttributes.h"
#include "lang/ops/pruning/PruningFormulas.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace mnemo {
#define GEN_PASS_DEF_COMPRESSWEIGHTS
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

/// A new parameter argument of @eval_step, appended.
struct NewArg {
  std::string name;
  Type type;
};

struct CompressWeightsPass
    : public mnemo::impl::CompressWeightsBase<CompressWeightsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Inference keeps no training step: no gradients, no optimizer state.
    if (auto train = module.lookupSymbol<func::FuncOp>("train_step"))
      train.erase();
    eval = module.lookupSymbol<func::FuncOp>("eval_step");
    if (!eval) {
      module.emitError() << "inference needs the train section's loss, which "
                            "@eval_step evaluates on the test set";
      model::markUserError(module);
      return signalPassFailure();
    }
    model::setDenseWeightBytes(eval, parameterBytes());
    collectParams();
    DictionaryAttr train = model::trainSettings(module);
    llvm::StringSet<> quantized;
    if (auto list = train ? train.getAs<ArrayAttr>("quantize") : ArrayAttr())
      for (Attribute entry : list) {
        auto settings = llvm::cast<DictionaryAttr>(entry);
        for (Attribute p : settings.getAs<ArrayAttr>("params")) {
          StringRef name = llvm::cast<StringAttr>(p).getValue();
          if (failed(quantize(settings, name)))
            return signalPassFailure();
          quantized.insert(name);
        }
      }
    if (auto list = train ? train.getAs<ArrayAttr>("prune") : ArrayAttr())
      for (Attribute entry : list) {
        auto settings = llvm::cast<DictionaryAttr>(entry);
        for (Attribute p : settings.getAs<ArrayAttr>("params")) {
          StringRef name = llvm::cast<StringAttr>(p).getValue();
          // Quantized and pruned: the int8 codes hold the zeros.
          if (!quantized.contains(name) && failed(sparsify(settings, name)))
            return signalPassFailure();
        }
      }
    applyArgumentChanges();
  }

private:
  func::FuncOp eval;

  /// The original parameters by name; the arguments added and erased,
  /// applied to the function once at the end (one insertArgument or
  /// eraseArgument per weight rebuilds every argument's attributes, which is
  /// quadratic in a deep model's weights).
  llvm::StringMap<BlockArgument> params;
  unsigned originalArguments = 0;
  SmallVector<DictionaryAttr> addedAttrs;
  llvm::BitVector erased;

  void collectParams() {
    originalArguments = eval.getNumArguments();
    erased.resize(originalArguments);
    for (BlockArgument arg : eval.getArguments()) {
      if (model::argumentRole(eval, arg.getArgNumber()) == ArgumentRole::Param)
        params[model::argumentName(eval, arg.getArgNumber())] = arg;
    }
  }

  BlockArgument param(StringRef name) { return params.lookup(name); }

  /// The function's type and argument attributes for its block's arguments,
  /// then the erased ones removed.
  void applyArgumentChanges() {
    SmallVector<DictionaryAttr> attrs;
    for (unsigned i = 0; i < originalArguments; ++i)
      attrs.push_back(eval.getArgAttrDict(i));
    attrs.append(addedAttrs.begin(), addedAttrs.end());
    Block &body = eval.getBody().front();
    eval.setFunctionType(FunctionType::get(
        &getContext(), body.getArgumentTypes(), eval.getResultTypes()));
    eval.setAllArgAttrs(attrs);
    erased.resize(body.getNumArguments());
    eval.eraseArguments(erased);
  }

  /// The bytes of the parameters as trained (before any is compressed):
  /// what the memory report compares the inference plan's weights with.
  int64_t parameterBytes() {
    int64_t bytes = 0;
    for (BlockArgument arg : eval.getArguments()) {
      auto type = llvm::cast<RankedTensorType>(arg.getType());
      if (model::argumentRole(eval, arg.getArgNumber()) == ArgumentRole::Param)
        bytes += type.getNumElements() *
                 int64_t(llvm::divideCeil(type.getElementTypeBitWidth(), 8));
    }
    return bytes;
  }

  /// Every use of `weight` is `matmul(x, weight)` with `x` f32 and the
  /// weight read transposed (a linear layer's `x @ W^T`).
  static bool onlyLinearUses(Value weight) {
    if (weight.use_empty())
      return false;
    for (OpOperand &use : weight.getUses()) {
      auto mm = llvm::dyn_cast<MatmulOp>(use.getOwner());
      if (!mm || use.getOperandNumber() != 1 || !mm.getTransposeRhs() ||
          mm.getTransposeLhs() ||
          !llvm::cast<RankedTensorType>(mm.getLhs().getType())
               .getElementType()
               .isF32() ||
          !llvm::cast<RankedTensorType>(mm.getType()).getElementType().isF32())
        return false;
    }
    return true;
  }

  /// Adds the parameters `args` that replace `old` (role param, with no
  /// initializer: an inference plan's weights are loaded) at the end of
  /// the argument list, at `old`'s source location.
  SmallVector<Value> replaceParam(BlockArgument old, ArrayRef<NewArg> args) {
    OpBuilder b(&getContext());
    SmallVector<Value> values;
    for (const NewArg &a : args) {
      addedAttrs.push_back(
          model::argumentAttrs(b, ArgumentRole::Param, a.name));
      values.push_back(
          eval.getBody().front().addArgument(a.type, old.getLoc()));
    }
    return values;
  }

  void eraseParam(BlockArgument old) {
    assert(old.use_empty() && old.getArgNumber() < originalArguments);
    erased.set(old.getArgNumber());
  }

  LogicalResult quantize(DictionaryAttr settings, StringRef name) {
    BlockArgument weight = param(name);
    if (!weight)
      return eval.emitError() << "no parameter '" << name << "'";
    auto type = llvm::cast<RankedTensorType>(weight.getType());
    if (!type.getElementType().isF32())
      return emitError(weight.getLoc())
             << "inference quantizes f32 weights, not '" << name << "' "
             << type;
    StringRef kind = settingText(settings, "kind", "");
    int64_t bits = kind == "qat"    ? settingInt(settings, "bits", 8)
                   : kind == "int8" ? 8
                                    : 4;
    int64_t n = type.getNumElements();
    // The channels `train --export` writes scales for.
    StringRef granularity = settingText(settings, "granularity", "");
    int64_t channels =
        kind != "qat" && granularity == "per_group"
            ? n / std::max<int64_t>(1, settingInt(settings, "group", 128))
        : (kind != "qat" || granularity == "per_channel") && type.getRank() >= 2
            ? type.getDimSize(0)
            : 1;
    OpBuilder b(&getContext());
    Type i8 = b.getI8Type();
    auto codesType = bits == 8 ? RankedTensorType::get(type.getShape(), i8)
                               : RankedTensorType::get({(n + 1) / 2}, i8);
    SmallVector<Value> args = replaceParam(
        weight, {{name.str(), codesType},
                 {name.str() + ".scale",
                  RankedTensorType::get({channels}, b.getF32Type())},
                 {name.str() + ".zero_point",
                  RankedTensorType::get({channels}, b.getI32Type())}});
    Value codes = args[0], scale = args[1], zeroPoint = args[2];
    bool gemm = bits == 8 && type.getRank() == 2 &&
                channels == type.getDimSize(0) && onlyLinearUses(weight);
    if (gemm) {
      for (OpOperand &use : llvm::make_early_inc_range(weight.getUses())) {
        auto mm = llvm::cast<MatmulOp>(use.getOwner());
        b.setInsertionPoint(mm);
        auto lhsType = llvm::cast<RankedTensorType>(mm.getLhs().getType());
        int64_t rows = lhsType.getNumElements() / lhsType.getShape().back();
        auto rowType = [&](Type element) {
          return RankedTensorType::get({rows}, element);
        };
        auto rowsQ = b.create<QuantizeRowsOp>(
            mm.getLoc(),
            TypeRange{RankedTensorType::get(lhsType.getShape(), i8),
                      rowType(b.getF32Type()), rowType(b.getI32Type())},
            mm.getLhs());
        auto product = b.create<MatmulInt8Op>(
            mm.getLoc(), mm.getType(), rowsQ.getCodes(), rowsQ.getScale(),
            rowsQ.getSum(), codes, scale, zeroPoint);
        mm.getResult().replaceAllUsesWith(product.getResult());
        mm.erase();
      }
    } else {
      b.setInsertionPointToStart(&eval.getBody().front());
      auto dense = b.create<DequantizeOp>(weight.getLoc(), type, codes, scale,
                                          zeroPoint, b.getI64IntegerAttr(bits));
      weight.replaceAllUsesWith(dense.getResult());
    }
    eraseParam(weight);
    return success();
  }

  LogicalResult sparsify(DictionaryAttr settings, StringRef name) {
    BlockArgument weight = param(name);
    if (!weight)
      return eval.emitError() << "no parameter '" << name << "'";
    auto type = llvm::cast<RankedTensorType>(weight.getType());
    // Other shapes and uses keep the dense weight, its pruned elements zero.
    if (type.getRank() != 2 || !type.getElementType().isF32() ||
        !onlyLinearUses(weight))
      return success();
    int64_t rows = type.getDimSize(0), k = type.getDimSize(1);
    int64_t n = rows * k;
    StringRef kind = settingText(settings, "kind", "");
    OpBuilder b(&getContext());
    Type f32 = b.getF32Type();
    if (kind == "nm" && settingInt(settings, "n", 2) == 2 &&
        settingInt(settings, "m", 4) == 4 && k % 8 == 0) {
      SmallVector<Value> args = replaceParam(
          weight, {{name.str(), RankedTensorType::get({rows, k / 2}, f32)},
                   {name.str() + ".indices",
                    RankedTensorType::get({rows, k / 8}, b.getI8Type())}});
      for (OpOperand &use : llvm::make_early_inc_range(weight.getUses())) {
        auto mm = llvm::cast<MatmulOp>(use.getOwner());
        b.setInsertionPoint(mm);
        auto product = b.create<MatmulSparse24Op>(
            mm.getLoc(), mm.getType(), mm.getLhs(), args[0], args[1]);
        mm.getResult().replaceAllUsesWith(product.getResult());
        mm.erase();
      }
      eraseParam(weight);
      return success();
    }
    if (kind != "magnitude" ||
        settingText(settings, "scope", "layer") != "layer")
      return success();
    // The most nonzeros the trained weight can have: what the final
    // sparsity keeps (fewer when pruned further, as a later prune may).
    int64_t capacity =
        n - prune::prunedCount(settingNumber(settings, "sparsity", 0), n);
    bool narrow = k <= 32768;
    int64_t csrBytes = capacity * (4 + (narrow ? 2 : 4)) + (rows + 1) * 4;
    if (csrBytes >= n * 4)
      return success();
    SmallVector<Value> args = replaceParam(
        weight,
        {{name.str() + ".values", RankedTensorType::get({capacity}, f32)},
         {name.str() + ".columns",
          RankedTensorType::get({capacity}, narrow ? b.getIntegerType(16)
                                                   : b.getI32Type())},
         {name.str() + ".row_offsets",
          RankedTensorType::get({rows + 1}, b.getI32Type())}});
    for (OpOperand &use : llvm::make_early_inc_range(weight.getUses())) {
      auto mm = llvm::cast<MatmulOp>(use.getOwner());
      b.setInsertionPoint(mm);
      auto product = b.create<MatmulCsrOp>(
          mm.getLoc(), mm.getType(), mm.getLhs(), args[0], args[1], args[2]);
      mm.getResult().replaceAllUsesWith(product.getResult());
      mm.erase();
    }
    eraseParam(weight);
    return success();
  }
};

} // namespace
