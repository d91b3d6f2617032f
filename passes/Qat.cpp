//===- Qat.cpp - Quantization-aware training: fake-quantized weights ------===//
//
// See Passes.td (Qat). The pass only rewrites @forward: each quantized
// parameter's uses read `fake_quant(param, lo, hi)`, where lo and hi are new
// `buffer` arguments. Autodiff puts the observers in the training step.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/TrainSettings.h"

#include "lang/MnemoOps.h"
#include "lang/ModelAttributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mnemo {
#define GEN_PASS_DEF_QAT
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

/// PyTorch's observer defaults: MovingAverageMinMaxObserver's constant.
constexpr double kAveragingConstant = 0.01;

struct QatPass : public mnemo::impl::QatBase<QatPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    DictionaryAttr train = model::trainSettings(module);
    auto list = train ? train.getAs<ArrayAttr>("quantize") : ArrayAttr();
    if (!forward || !list || module.lookupSymbol("train_step"))
      return;
    Block &body = forward.getBody().front();
    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&body);
    llvm::StringMap<BlockArgument> byName;
    for (BlockArgument arg : body.getArguments())
      if (StringRef name = model::argumentName(forward, arg.getArgNumber());
          !name.empty())
        byName[name] = arg;
    // First every fake-quantized parameter and its two observed ranges,
    // then the ranges' arguments in one insertion (one insertArgument per
    // range would rebuild the argument attributes each time: quadratic in
    // a deep model's parameters), then the ops.
    SmallVector<Request> requests;
    for (Attribute entry : list) {
      auto settings = llvm::cast<DictionaryAttr>(entry);
      StringRef kind = settingText(settings, "kind", "");
      // Post-training int8/int4 leaves training as it is: `train --export`
      // quantizes the trained weights (runtime/Export.h).
      if (kind != "qat")
        continue;
      int64_t bits = settingInt(settings, "bits", 8);
      Request r;
      r.qmin = -(int64_t(1) << (bits - 1));
      r.qmax = -r.qmin - 1;
      r.perChannel = settingText(settings, "granularity", "") == "per_channel";
      r.symmetric = settingText(settings, "scheme", "") == "symmetric";
      r.averaging = settingText(settings, "observer", "") == "moving_average"
                        ? kAveragingConstant
                        : 0.0;
      for (Attribute p : settings.getAs<ArrayAttr>("params")) {
        r.name = llvm::cast<StringAttr>(p).getValue();
        r.param = byName.lookup(r.name);
        if (!r.param) {
          forward.emitError() << "no parameter '" << r.name << "'";
          return signalPassFailure();
        }
        auto type = llvm::cast<RankedTensorType>(r.param.getType());
        if (!type.getElementType().isF32()) {
          emitError(r.param.getLoc())
              << "quantization-aware training needs an f32 parameter, not '"
              << r.name << "' " << type;
          return signalPassFailure();
        }
        requests.push_back(r);
      }
    }
    if (requests.empty())
      return;
    auto zeros =
        b.getDictionaryAttr({b.getNamedAttr("kind", b.getStringAttr("zeros"))});
    SmallVector<unsigned> indices;
    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    SmallVector<Location> locs;
    unsigned first = forward.getNumArguments();
    for (const Request &r : requests) {
      auto type = llvm::cast<RankedTensorType>(r.param.getType());
      // Per output channel: dim 0 of a weight [out, in...]; a scalar or a
      // vector gets one range.
      int64_t axis = r.perChannel && type.getRank() >= 2 ? 0 : -1;
      auto rangeType = RankedTensorType::get(
          {axis < 0 ? 1 : type.getDimSize(0)}, b.getF32Type());
      for (StringRef bound : {"min", "max"}) {
        indices.push_back(first);
        types.push_back(rangeType);
        attrs.push_back(
            model::argumentAttrs(b, ArgumentRole::Buffer,
                                 (r.name + ".observer." + bound).str(), zeros));
        locs.push_back(r.param.getLoc());
      }
    }
    forward.insertArguments(indices, types, attrs, locs);
    for (auto [k, r] : llvm::enumerate(requests)) {
      auto type = llvm::cast<RankedTensorType>(r.param.getType());
      int64_t axis = r.perChannel && type.getRank() >= 2 ? 0 : -1;
      Value lo = body.getArgument(first + 2 * k),
            hi = body.getArgument(first + 2 * k + 1);
      auto fake = b.create<FakeQuantOp>(
          r.param.getLoc(), type, r.param, lo, hi, b.getI64IntegerAttr(axis),
          b.getI64IntegerAttr(r.qmin), b.getI64IntegerAttr(r.qmax),
          b.getBoolAttr(r.symmetric));
      // What training observes: Autodiff puts the observer before the op.
      model::setObserverAveraging(fake, r.averaging);
      r.param.replaceAllUsesExcept(fake.getResult(), fake);
    }
  }

  /// One parameter to fake-quantize, as its directive says.
  struct Request {
    BlockArgument param;
    std::string name;
    bool perChannel = false, symmetric = false;
    double averaging = 0;
    int64_t qmin = 0, qmax = 0;
  };
};

} // namespace
