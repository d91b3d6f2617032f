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
    auto train = module->getAttrOfType<DictionaryAttr>("mnemo.train");
    auto list = train ? train.getAs<ArrayAttr>("quantize") : ArrayAttr();
    if (!forward || !list || module.lookupSymbol("train_step"))
      return;
    Block &body = forward.getBody().front();
    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&body);
    for (Attribute entry : list) {
      auto settings = llvm::cast<DictionaryAttr>(entry);
      StringRef kind = settingText(settings, "kind", "");
      // Post-training int8/int4 leaves training as it is: `train --export`
      // quantizes the trained weights (runtime/Export.h).
      if (kind != "qat")
        continue;
      int64_t bits = settingInt(settings, "bits", 8);
      int64_t qmin = -(int64_t(1) << (bits - 1)), qmax = -qmin - 1;
      bool perChannel =
          settingText(settings, "granularity", "") == "per_channel";
      bool symmetric = settingText(settings, "scheme", "") == "symmetric";
      double averaging =
          settingText(settings, "observer", "") == "moving_average"
              ? kAveragingConstant
              : 0.0;
      for (Attribute p : settings.getAs<ArrayAttr>("params"))
        if (failed(quantize(forward, llvm::cast<StringAttr>(p).getValue(),
                            perChannel, symmetric, averaging, qmin, qmax, b)))
          return signalPassFailure();
    }
  }

  LogicalResult quantize(func::FuncOp forward, StringRef name, bool perChannel,
                         bool symmetric, double averaging, int64_t qmin,
                         int64_t qmax, OpBuilder &b) {
    Block &body = forward.getBody().front();
    BlockArgument param;
    for (BlockArgument arg : body.getArguments()) {
      auto n = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    "mnemo.name");
      if (n && n.getValue() == name)
        param = arg;
    }
    if (!param)
      return forward.emitError() << "no parameter '" << name << "'";
    auto type = llvm::cast<RankedTensorType>(param.getType());
    if (!type.getElementType().isF32())
      return emitError(param.getLoc())
             << "quantization-aware training needs an f32 parameter, not '"
             << name << "' " << type;
    // Per output channel: dim 0 of a weight [out, in...]; a scalar or a
    // vector gets one range.
    int64_t axis = perChannel && type.getRank() >= 2 ? 0 : -1;
    auto rangeType = RankedTensorType::get({axis < 0 ? 1 : type.getDimSize(0)},
                                           b.getF32Type());
    auto zeros =
        b.getDictionaryAttr({b.getNamedAttr("kind", b.getStringAttr("zeros"))});
    Value range[2];
    const char *const bounds[] = {"min", "max"};
    for (auto [i, bound] : llvm::enumerate(bounds)) {
      unsigned index = forward.getNumArguments();
      forward.insertArgument(
          index, rangeType,
          b.getDictionaryAttr(
              {b.getNamedAttr("mnemo.role", b.getStringAttr("buffer")),
               b.getNamedAttr(
                   "mnemo.name",
                   b.getStringAttr(name + ".observer." + StringRef(bound))),
               b.getNamedAttr("mnemo.init", zeros)}),
          param.getLoc());
      range[i] = body.getArgument(index);
    }
    auto fake = b.create<FakeQuantOp>(
        param.getLoc(), type, param, range[0], range[1],
        b.getI64IntegerAttr(axis), b.getI64IntegerAttr(qmin),
        b.getI64IntegerAttr(qmax), b.getBoolAttr(symmetric));
    // What training observes: Autodiff puts the observer before the op.
    fake->setAttr("mnemo.observer",
                  b.getDictionaryAttr({b.getNamedAttr(
                      "averaging_constant", b.getF64FloatAttr(averaging))}));
    param.replaceAllUsesExcept(fake.getResult(), fake);
    return success();
  }
};

} // namespace
