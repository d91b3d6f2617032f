//===- Optimizers.cpp - Optimizers and schedules as mnemo IR --------------===//

#include "passes/Optimizers.h"
#include "lang/MnemoOps.h"
#include "lang/ops/optimizers/OptimizersKernels.h"
#include "passes/TrainSettings.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mnemo;

FailureOr<Optimizer> Optimizer::fromSettings(DictionaryAttr train,
                                             Location loc) {
  Optimizer opt;
  opt.settings =
      train ? train.getAs<DictionaryAttr>("optimizer") : DictionaryAttr();
  if (!opt.settings) {
    emitError(loc) << "the train section names no optimizer (for example "
                      "'optimizer = adamw(lr = 1e-3)')";
    return failure();
  }
  opt.kind = opt.settings.getAs<StringAttr>("kind").getValue().str();
  opt.schedule = train.getAs<DictionaryAttr>("schedule");
  if (auto clip = train.getAs<FloatAttr>("clip_grad_norm"))
    opt.clipNorm = clip.getValueAsDouble();
  if (opt.kind == "adam" || opt.kind == "adamw" || opt.kind == "adamw8bit")
    opt.state = {"exp_avg", "exp_avg_sq"};
  else if (opt.kind == "sgd" && settingNumber(opt.settings, "momentum", 0) != 0)
    opt.state = {"momentum_buffer"};
  else if (opt.kind != "sgd") {
    emitError(loc) << "optimizer '" << opt.kind
                   << "' is not supported (supported: sgd, adam, adamw, "
                      "adamw8bit)";
    return failure();
  }
  return opt;
}

int64_t Optimizer::quantizationBlock() const {
  return int64_t(settingNumber(settings, "block", double(quant8::kBlock)));
}

bool Optimizer::quantizesState(Type paramType) const {
  return kind == "adamw8bit" &&
         llvm::cast<ShapedType>(paramType).getNumElements() >=
             quant8::kMinElements;
}

std::vector<std::pair<std::string, Type>>
Optimizer::stateFor(Type paramType) const {
  std::vector<std::pair<std::string, Type>> result;
  if (!quantizesState(paramType)) {
    for (const std::string &name : state)
      result.push_back({name, paramType});
    return result;
  }
  // Block-wise 8-bit moments: one byte per element (the parameter's shape)
  // and one f32 maximum per block.
  auto type = llvm::cast<RankedTensorType>(paramType);
  MLIRContext *ctx = type.getContext();
  int64_t block = quantizationBlock();
  auto codes = RankedTensorType::get(type.getShape(), IntegerType::get(ctx, 8));
  auto absmax = RankedTensorType::get(
      {(type.getNumElements() + block - 1) / block}, Float32Type::get(ctx));
  for (const std::string &name : state) {
    result.push_back({name + ".codes", codes});
    result.push_back({name + ".absmax", absmax});
  }
  return result;
}

Value Optimizer::learningRate(OpBuilder &b, Location loc, Value step,
                              Value totalSteps) const {
  StringRef scheduleKind = "constant";
  if (schedule)
    scheduleKind = schedule.getAs<StringAttr>("kind").getValue();
  // linear_warmup is a constant schedule with a warm-up.
  StringRef kindAttr = scheduleKind == "cosine" ? "cosine" : "constant";
  auto f32 = RankedTensorType::get({}, b.getF32Type());
  return b.create<LrScheduleOp>(
      loc, f32, step, totalSteps, b.getStringAttr(kindAttr),
      b.getF64FloatAttr(settingNumber(settings, "lr", 1e-3)),
      b.getI64IntegerAttr(int64_t(settingNumber(schedule, "warmup", 0))),
      b.getI64IntegerAttr(int64_t(settingNumber(schedule, "steps", 0))),
      b.getF64FloatAttr(settingNumber(schedule, "min_lr", 0)));
}

SmallVector<Value> Optimizer::update(OpBuilder &b, Location loc, Value param,
                                     Value grad, ValueRange stateValues,
                                     Value lr, Value step, Value skip) const {
  double weightDecay = settingNumber(settings, "weight_decay", 0);
  auto decayParams = settings.getAs<StringAttr>("decay_params");
  if (decayParams && decayParams.getValue() == "matrices" &&
      llvm::cast<RankedTensorType>(param.getType()).getRank() < 2)
    weightDecay = 0;
  if (quantizesState(param.getType())) {
    auto betas = settings.getAs<ArrayAttr>("betas");
    auto op = b.create<Adam8bitUpdateOp>(
        loc, param.getType(), stateValues[0].getType(),
        stateValues[1].getType(), stateValues[2].getType(),
        stateValues[3].getType(), param, grad, stateValues[0], stateValues[1],
        stateValues[2], stateValues[3], lr, step, skip,
        b.getF64FloatAttr(llvm::cast<FloatAttr>(betas[0]).getValueAsDouble()),
        b.getF64FloatAttr(llvm::cast<FloatAttr>(betas[1]).getValueAsDouble()),
        b.getF64FloatAttr(settingNumber(settings, "eps", 1e-8)),
        b.getF64FloatAttr(weightDecay),
        b.getI64IntegerAttr(quantizationBlock()));
    return {op.getNewParam(), op.getNewExpAvgCodes(), op.getNewExpAvgAbsmax(),
            op.getNewExpAvgSqCodes(), op.getNewExpAvgSqAbsmax()};
  }
  if (kind == "adam" || kind == "adamw" || kind == "adamw8bit") {
    auto betas = settings.getAs<ArrayAttr>("betas");
    double beta1 = llvm::cast<FloatAttr>(betas[0]).getValueAsDouble();
    double beta2 = llvm::cast<FloatAttr>(betas[1]).getValueAsDouble();
    auto op = b.create<AdamUpdateOp>(
        loc, param.getType(), param.getType(), param.getType(), param, grad,
        stateValues[0], stateValues[1], lr, step, skip,
        b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
        b.getF64FloatAttr(settingNumber(settings, "eps", 1e-8)),
        b.getF64FloatAttr(weightDecay), b.getBoolAttr(kind != "adam"));
    return {op.getNewParam(), op.getNewExpAvg(), op.getNewExpAvgSq()};
  }
  double momentum = settingNumber(settings, "momentum", 0);
  if (momentum != 0) {
    auto nesterov = settings.getAs<BoolAttr>("nesterov");
    auto op = b.create<SgdUpdateOp>(
        loc, param.getType(), param.getType(), param, grad, stateValues[0], lr,
        step, skip, b.getF64FloatAttr(momentum),
        b.getF64FloatAttr(settingNumber(settings, "dampening", 0)),
        b.getF64FloatAttr(weightDecay),
        b.getBoolAttr(nesterov && nesterov.getValue()));
    return {op.getNewParam(), op.getNewMomentumBuffer()};
  }
  // Plain SGD: param - lr * (grad + weight_decay * param), as elementwise ops.
  auto type = llvm::cast<RankedTensorType>(param.getType());
  Value direction = grad;
  if (weightDecay != 0) {
    Value wd = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(
                 type, b.getFloatAttr(type.getElementType(), weightDecay)));
    direction =
        b.create<AddOp>(loc, type, grad, b.create<MulOp>(loc, type, param, wd));
  }
  Value lrSpread = b.create<BroadcastOp>(loc, type, lr);
  Value delta = b.create<MulOp>(loc, type, lrSpread, direction);
  Value updated = b.create<SubOp>(loc, type, param, delta);
  if (!skip)
    return {updated};
  // A skipped step keeps the parameter.
  auto maskType = RankedTensorType::get(type.getShape(), b.getI1Type());
  Value mask = b.create<BroadcastOp>(
      loc, maskType,
      b.create<CastOp>(loc, RankedTensorType::get({}, b.getI1Type()), skip));
  return {b.create<WhereOp>(loc, type, mask, param, updated).getResult()};
}
