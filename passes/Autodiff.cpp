//===- Autodiff.cpp - Reverse-mode differentiation into @train_step -------===//
//
// Builds @train_step and @eval_step from @forward (see Passes.td). The pass
// is generic: every op's gradient comes from its GradientOpInterface, which
// each op implements in its family's folder (lang/ops/FAMILY/); the
// pass only walks the graph backwards and sums gradients of values with
// several uses.
//
//===----------------------------------------------------------------------===//

#include "passes/Backward.h"
#include "passes/Optimizers.h"
#include "passes/Passes.h"
#include "passes/Pruning.h"

#include "lang/MnemoOps.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/StringSet.h"

namespace mnemo {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

/// The role of each @forward argument, from its `mnemo.role` attribute.
struct ForwardSignature {
  SmallVector<unsigned> inputs, targets, params;
  /// State the forward reads but does not train: running statistics,
  /// counters, quantization observers.
  SmallVector<unsigned> buffers;
  int lossResult = -1, outputResult = -1;
  /// The evaluation forward's results, where the model's forward differs
  /// in evaluation (it reads `training`); -1 otherwise.
  int evalLossResult = -1, evalOutputResult = -1;
  /// (result, argument): the training forward's new value of a buffer.
  SmallVector<std::pair<unsigned, unsigned>> bufferUpdates;
};

FailureOr<ForwardSignature> readSignature(func::FuncOp forward) {
  ForwardSignature sig;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    std::optional<ArgumentRole> role = model::argumentRole(forward, i);
    if (!role) {
      forward.emitError() << "argument " << i << " has no role";
      return failure();
    }
    if (*role == ArgumentRole::Input)
      sig.inputs.push_back(i);
    else if (*role == ArgumentRole::Target)
      sig.targets.push_back(i);
    else if (*role == ArgumentRole::Param)
      sig.params.push_back(i);
    else if (*role == ArgumentRole::Buffer)
      sig.buffers.push_back(i);
  }
  for (unsigned i = 0; i < forward.getNumResults(); ++i) {
    StringRef name = model::resultName(forward, i);
    if (name == "loss")
      sig.lossResult = i;
    if (name == "output")
      sig.outputResult = i;
    if (name == "eval_loss")
      sig.evalLossResult = i;
    if (name == "eval_output")
      sig.evalOutputResult = i;
    if (std::optional<unsigned> arg = plan::reusedArgument(forward, i)) {
      if (*arg >= forward.getNumArguments() ||
          model::argumentRole(forward, *arg) != ArgumentRole::Buffer) {
        forward.emitError() << "result " << i << " updates argument " << *arg
                            << ", which is not a buffer";
        return failure();
      }
      sig.bufferUpdates.push_back({i, *arg});
    }
  }
  return sig;
}

/// Whether @forward's output holds class scores for a single integer
/// target, so that an accuracy metric makes sense.
bool isClassification(func::FuncOp forward, const ForwardSignature &sig) {
  if (sig.outputResult < 0 || sig.targets.size() != 1)
    return false;
  auto out =
      llvm::cast<RankedTensorType>(forward.getResultTypes()[sig.outputResult]);
  auto target =
      llvm::cast<RankedTensorType>(forward.getArgumentTypes()[sig.targets[0]]);
  if (!llvm::isa<FloatType>(out.getElementType()) ||
      !llvm::isa<IntegerType>(target.getElementType()) ||
      out.getRank() != target.getRank() + 1)
    return false;
  return out.getShape().drop_back() == target.getShape();
}

/// Builds @train_step from @forward:
///   (params..., buffers..., each param's optimizer state..., masks...,
///    [loss_scale, loss_scale.growth], inputs..., targets..., step,
///    total_steps)
///   -> (loss, new params..., new state..., updated buffers..., new
///       masks..., [new scale, new growth], lr, [skipped], grad_norm)
/// The forward is cloned (observing what it fake-quantizes), differentiated
/// op by op, and its gradients scaled, clipped and applied by the
/// optimizer.
class TrainStepBuilder {
public:
  TrainStepBuilder(ModuleOp module, func::FuncOp forward,
                   const ForwardSignature &sig, const Optimizer &optimizer,
                   const Pruning &pruning)
      : module(module), forward(forward), sig(sig), optimizer(optimizer),
        pruning(pruning), b(module.getContext()),
        fwdBody(forward.getBody().front()),
        fwdReturn(llvm::cast<func::ReturnOp>(fwdBody.getTerminator())),
        loc(forward.getLoc()), f32(RankedTensorType::get({}, b.getF32Type())),
        numParams(sig.params.size()) {}

  LogicalResult build() {
    declareArguments();
    createFunction();
    if (failed(cloneForward()))
      return failure();
    if (failed(differentiate()))
      return failure();
    scaleGradients();
    updateParameters();
    pruneParameters();
    returnResults();
    return success();
  }

private:
  void declareArguments();
  void addArgument(Type type, DictionaryAttr attrs);
  void createFunction();
  LogicalResult cloneForward();
  LogicalResult observeFakeQuantized();
  LogicalResult differentiate();
  void scaleGradients();
  void updateParameters();
  void pruneParameters();
  void returnResults();
  Value argument(unsigned index) const { return body->getArgument(index); }
  Location paramLoc(unsigned k) const {
    return fwdBody.getArgument(sig.params[k]).getLoc();
  }

  ModuleOp module;
  func::FuncOp forward;
  const ForwardSignature &sig;
  const Optimizer &optimizer;
  const Pruning &pruning;
  OpBuilder b;
  Block &fwdBody;
  func::ReturnOp fwdReturn;
  Location loc;
  RankedTensorType f32;
  unsigned numParams;

  // The signature, and where each group of arguments starts.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  unsigned bufferStart = 0, batchStart = 0;
  // Each parameter's first state argument (the count differs per parameter
  // with adamw8bit), and one past the last parameter's.
  SmallVector<unsigned> stateStart;
  // Each pruned parameter's mask argument; -1 where it is not pruned.
  SmallVector<int> maskArg;
  // f16 trains with dynamic loss scaling: the scale's argument, and its
  // count of finite steps' after it.
  bool lossScaling = false;
  unsigned scaleArg = 0;

  func::FuncOp trainStep;
  Block *body = nullptr;
  IRMapping map;
  SmallVector<Operation *> forwardOps;
  Value loss, step;
  // Buffers' new values by argument: running statistics, observed ranges.
  llvm::DenseMap<unsigned, Value> bufferUpdates;
  // The backward's gradients by value.
  llvm::DenseMap<Value, Value> grads;
  // Each parameter's gradient (null where it does not reach the loss).
  SmallVector<Value> paramGrads;
  Value gradNorm, skip, newScale, newGrowth, lr;
  SmallVector<Value> newParams, newMasks;
  SmallVector<SmallVector<Value>> newStateOf;
};

void TrainStepBuilder::addArgument(Type type, DictionaryAttr attrs) {
  argTypes.push_back(type);
  argAttrs.push_back(attrs);
}

void TrainStepBuilder::declareArguments() {
  auto attrs = [&](ArgumentRole role, const Twine &name, DictionaryAttr init) {
    return model::argumentAttrs(b, role, name.str(), init);
  };
  auto name = [&](unsigned k) {
    return model::argumentName(forward, sig.params[k]);
  };
  auto type = [&](unsigned k) {
    return forward.getArgumentTypes()[sig.params[k]];
  };
  for (unsigned k = 0; k < numParams; ++k)
    addArgument(type(k), attrs(ArgumentRole::Param, name(k),
                               model::argumentInit(forward, sig.params[k])));
  // Buffers next, in the forward's order: @eval_step lays out the
  // parameters region the same way.
  bufferStart = argTypes.size();
  for (unsigned i : sig.buffers)
    addArgument(forward.getArgumentTypes()[i], forward.getArgAttrDict(i));
  auto zeros =
      b.getDictionaryAttr({b.getNamedAttr("kind", b.getStringAttr("zeros"))});
  for (unsigned k = 0; k < numParams; ++k) {
    stateStart.push_back(argTypes.size());
    for (auto &[state, stateType] : optimizer.stateFor(type(k)))
      addArgument(stateType,
                  attrs(ArgumentRole::OptState, name(k) + "." + state, zeros));
  }
  stateStart.push_back(argTypes.size());
  // Each pruned parameter's mask, one bit per element (set: pruned).
  maskArg.assign(numParams, -1);
  for (unsigned k = 0; k < numParams; ++k) {
    if (!pruning.prunes(k))
      continue;
    maskArg[k] = int(argTypes.size());
    addArgument(pruning.maskType(type(k)),
                attrs(ArgumentRole::OptState, name(k) + ".mask", zeros));
  }
  // f16 trains with dynamic loss scaling (GradScaler's constants): the
  // scale and the count of finite steps are optimizer state, kept with the
  // parameters on the device and in checkpoints.
  lossScaling = model::precision(module) == "f16";
  if (lossScaling) {
    scaleArg = argTypes.size();
    addArgument(
        f32, attrs(ArgumentRole::OptState, "loss_scale",
                   b.getDictionaryAttr(
                       {b.getNamedAttr("kind", b.getStringAttr("constant")),
                        b.getNamedAttr("value", b.getF64FloatAttr(65536.0))})));
    addArgument(f32, attrs(ArgumentRole::OptState, "loss_scale.growth", zeros));
  }
  batchStart = argTypes.size();
  for (ArrayRef<unsigned> group :
       {ArrayRef<unsigned>(sig.inputs), ArrayRef<unsigned>(sig.targets)})
    for (unsigned i : group)
      addArgument(forward.getArgumentTypes()[i], forward.getArgAttrDict(i));
  // The step and the run's length: 64-bit, as a run may be longer than
  // 2^31 steps.
  auto i64 = RankedTensorType::get({}, b.getI64Type());
  addArgument(i64, attrs(ArgumentRole::Step, "step", {}));
  addArgument(i64, attrs(ArgumentRole::TotalSteps, "total_steps", {}));
}

void TrainStepBuilder::createFunction() {
  b.setInsertionPointToEnd(module.getBody());
  trainStep = b.create<func::FuncOp>(forward.getLoc(), "train_step",
                                     b.getFunctionType(argTypes, {}));
  body = trainStep.addEntryBlock();
  // At once: one setArgAttrs per argument rebuilds the whole list each
  // time, quadratic in the arguments (a 10,000-layer model's 20,000).
  trainStep.setAllArgAttrs(argAttrs);
  step = argument(argTypes.size() - 2);
}

/// The forward, with its arguments mapped to the new ones.
LogicalResult TrainStepBuilder::cloneForward() {
  auto mapArgument = [&](unsigned from, unsigned to) {
    map.map(fwdBody.getArgument(from), argument(to));
    argument(to).setLoc(fwdBody.getArgument(from).getLoc());
  };
  for (auto [k, p] : llvm::enumerate(sig.params))
    mapArgument(p, k);
  for (auto [k, i] : llvm::enumerate(sig.buffers))
    mapArgument(i, bufferStart + k);
  unsigned next = batchStart;
  for (ArrayRef<unsigned> group :
       {ArrayRef<unsigned>(sig.inputs), ArrayRef<unsigned>(sig.targets)})
    for (unsigned i : group)
      mapArgument(i, next++);
  b.setInsertionPointToEnd(body);
  // Where the forward holds an evaluation forward too, only what the
  // training results need is the training step's (the evaluation's
  // fake-quant ops must not observe a second time).
  llvm::DenseSet<Operation *> training;
  if (sig.evalOutputResult >= 0) {
    SmallVector<Value> roots{fwdReturn.getOperand(sig.outputResult)};
    if (sig.lossResult >= 0)
      roots.push_back(fwdReturn.getOperand(sig.lossResult));
    for (auto [result, arg] : sig.bufferUpdates)
      roots.push_back(fwdReturn.getOperand(result));
    while (!roots.empty()) {
      Operation *def = roots.pop_back_val().getDefiningOp();
      if (def && training.insert(def).second)
        llvm::append_range(roots, def->getOperands());
    }
  }
  for (Operation &op : fwdBody)
    if (&op != fwdReturn &&
        (sig.evalOutputResult < 0 || training.contains(&op)))
      forwardOps.push_back(b.clone(op, map));
  loss = map.lookup(fwdReturn.getOperand(sig.lossResult));
  if (failed(observeFakeQuantized()))
    return failure();
  // What the forward leaves in the buffers it updates (running
  // statistics), written back as the step's results.
  for (auto [result, arg] : sig.bufferUpdates) {
    unsigned k = llvm::find(sig.buffers, arg) - sig.buffers.begin();
    bufferUpdates[bufferStart + k] = map.lookup(fwdReturn.getOperand(result));
  }
  b.setInsertionPointToEnd(body);
  return success();
}

/// Training observes what it fake-quantizes: each observed range is
/// updated before its fake-quant reads it, and written back.
LogicalResult TrainStepBuilder::observeFakeQuantized() {
  SmallVector<Operation *> observed;
  for (Operation *op : forwardOps) {
    observed.push_back(op);
    auto fake = llvm::dyn_cast<FakeQuantOp>(op);
    std::optional<double> averaging =
        fake ? model::observerAveraging(fake) : std::nullopt;
    if (!averaging)
      continue;
    auto lo = llvm::dyn_cast<BlockArgument>(fake.getMin());
    auto hi = llvm::dyn_cast<BlockArgument>(fake.getMax());
    if (!lo || !hi || lo.getOwner() != body || hi.getOwner() != body)
      return fake.emitError("an observed range must be a buffer argument");
    b.setInsertionPoint(fake);
    auto observe = b.create<ObserveMinMaxOp>(
        fake.getLoc(), lo.getType(), hi.getType(), fake.getInput(), lo, hi,
        step, fake.getAxisAttr(), b.getF64FloatAttr(*averaging));
    fake.getMinMutable().assign(observe.getNewMin());
    fake.getMaxMutable().assign(observe.getNewMax());
    model::clearObserver(fake);
    bufferUpdates[lo.getArgNumber()] = observe.getNewMin();
    bufferUpdates[hi.getArgNumber()] = observe.getNewMax();
    observed.insert(observed.end() - 1, observe);
  }
  forwardOps = std::move(observed);
  return success();
}

/// The backward: seed d(loss)/d(loss) = 1, then each op's rule, in reverse
/// program order. (With loss scaling, the seed is the scale: every gradient
/// comes out scaled, and f16's small gradients stay representable.)
LogicalResult TrainStepBuilder::differentiate() {
  auto lossType = llvm::cast<RankedTensorType>(loss.getType());
  Value seed =
      lossScaling
          ? argument(scaleArg)
          : Value(b.create<ConstantOp>(
                loss.getLoc(),
                DenseElementsAttr::get(
                    lossType, b.getFloatAttr(lossType.getElementType(), 1.0))));
  FailureOr<llvm::DenseMap<Value, Value>> backward =
      buildBackward(b, forwardOps, loss, seed);
  if (failed(backward))
    return failure();
  grads = std::move(*backward);
  // Gradients of the parameters; a parameter that never reaches the loss
  // keeps its value and state.
  b.setInsertionPointToEnd(body);
  for (unsigned k = 0; k < numParams; ++k) {
    Value g = grads.lookup(argument(k));
    if (!g)
      emitWarning(paramLoc(k))
          << "parameter '" << model::argumentName(forward, sig.params[k])
          << "' does not reach the loss; it is not trained";
    // A pruned element's gradient is zero, so its optimizer state stays
    // zero and it stays pruned.
    if (g && maskArg[k] >= 0)
      g = Pruning::apply(b, g.getLoc(), g, argument(maskArg[k]));
    paramGrads.push_back(g);
  }
  return success();
}

/// The gradients' global norm; under loss scaling unscaled by 1/scale (and
/// the scale updated), and clipped to the optimizer's clip norm, the two
/// folded into one factor.
void TrainStepBuilder::scaleGradients() {
  SmallVector<Value> present;
  for (Value g : paramGrads)
    if (g)
      present.push_back(g);
  gradNorm = present.empty()
                 ? b.create<ConstantOp>(loc, DenseElementsAttr::get(f32, 0.0f))
                       .getResult()
                 : b.create<GlobalNormOp>(loc, f32, present).getResult();
  // Loss scaling: the scaled norm decides (an overflow makes it inf or
  // NaN); the gradients are unscaled by 1/scale, folded into the clipping
  // factor when there is one.
  Value unscale;
  if (lossScaling) {
    Value scale = argument(scaleArg), growth = argument(scaleArg + 1);
    // Read the scale before its update (which may be written in place).
    unscale = b.create<DivOp>(
        loc, f32, b.create<ConstantOp>(loc, DenseElementsAttr::get(f32, 1.0f)),
        scale);
    auto update = b.create<LossScaleUpdateOp>(
        loc, f32, f32, f32, gradNorm, scale, growth, b.getF64FloatAttr(2.0),
        b.getF64FloatAttr(0.5), b.getI64IntegerAttr(2000));
    newScale = update.getNewScale();
    newGrowth = update.getNewCount();
    skip = update.getSkip();
    gradNorm = b.create<MulOp>(loc, f32, gradNorm, unscale);
  }
  Value factor = unscale;
  if (optimizer.clipNorm && !present.empty()) {
    Value coefficient = b.create<ClipCoefficientOp>(
        loc, f32, gradNorm, b.getF64FloatAttr(*optimizer.clipNorm));
    factor = unscale ? Value(b.create<MulOp>(loc, f32, coefficient, unscale))
                     : coefficient;
  }
  if (!factor || present.empty())
    return;
  for (Value &g : paramGrads) {
    if (!g)
      continue;
    auto type = llvm::cast<RankedTensorType>(g.getType());
    Value c = factor;
    if (type.getElementType() != f32.getElementType())
      c = b.create<CastOp>(loc,
                           RankedTensorType::get({}, type.getElementType()), c);
    g = b.create<MulOp>(loc, type, g, b.create<BroadcastOp>(loc, type, c));
  }
}

/// The optimizer's step for each trained parameter and its state.
void TrainStepBuilder::updateParameters() {
  Value totalSteps = argument(argTypes.size() - 1);
  lr = optimizer.learningRate(b, loc, step, totalSteps);
  newParams.resize(numParams);
  newStateOf.resize(numParams);
  for (unsigned k = 0; k < numParams; ++k) {
    Value param = argument(k);
    ValueRange state = body->getArguments().slice(
        stateStart[k], stateStart[k + 1] - stateStart[k]);
    if (!paramGrads[k]) {
      newParams[k] = param;
      newStateOf[k].append(state.begin(), state.end());
      continue;
    }
    SmallVector<Value> updated = optimizer.update(
        b, paramLoc(k), param, paramGrads[k], state, lr, step, skip);
    newParams[k] = updated[0];
    newStateOf[k].append(updated.begin() + 1, updated.end());
  }
}

/// Pruning: new masks from the updated weights, then the weights and the
/// state of their shape (moments, 8-bit codes) masked by them.
void TrainStepBuilder::pruneParameters() {
  if (pruning.empty())
    return;
  SmallVector<Value> masks(numParams);
  for (unsigned k = 0; k < numParams; ++k)
    if (maskArg[k] >= 0)
      masks[k] = argument(maskArg[k]);
  SmallVector<Value> updated;
  newMasks = pruning.updateMasks(b, loc, step, newParams, masks, updated);
  for (unsigned k = 0; k < numParams; ++k) {
    if (!newMasks[k])
      continue;
    auto shape = llvm::cast<ShapedType>(newParams[k].getType()).getShape();
    // Only after a step that changed the masks: otherwise the masked
    // gradient has kept them zero where pruned.
    newParams[k] =
        Pruning::apply(b, paramLoc(k), newParams[k], newMasks[k], updated[k]);
    for (Value &s : newStateOf[k])
      if (llvm::cast<ShapedType>(s.getType()).getShape() == shape)
        s = Pruning::apply(b, paramLoc(k), s, newMasks[k], updated[k]);
  }
}

/// (loss, new params..., new state..., lr, grad_norm); updated tensors may
/// be written into the buffers of the arguments they replace.
void TrainStepBuilder::returnResults() {
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  auto named = [&](Value value, StringRef name) {
    results.push_back(value);
    resultAttrs.push_back(b.getDictionaryAttr(model::resultNameAttr(b, name)));
  };
  auto replacing = [&](Value value, unsigned argIndex) {
    results.push_back(value);
    resultAttrs.push_back(b.getDictionaryAttr(
        {model::resultNameAttr(b, model::argumentName(trainStep, argIndex)),
         plan::reusedArgumentAttr(b, argIndex)}));
  };
  named(loss, "loss");
  for (unsigned k = 0; k < numParams; ++k)
    replacing(newParams[k], k);
  unsigned stateArg = stateStart.front();
  for (ArrayRef<Value> states : newStateOf)
    for (Value state : states)
      replacing(state, stateArg++);
  for (unsigned k = 0; k < sig.buffers.size(); ++k)
    if (Value updated = bufferUpdates.lookup(bufferStart + k))
      replacing(updated, bufferStart + k);
  for (unsigned k = 0; k < numParams; ++k)
    if (maskArg[k] >= 0)
      replacing(newMasks[k], maskArg[k]);
  if (lossScaling) {
    replacing(newScale, scaleArg);
    replacing(newGrowth, scaleArg + 1);
  }
  named(lr, "lr");
  // 1 when the step was skipped; the trainer counts them.
  if (lossScaling)
    named(skip, "skipped");
  named(gradNorm, "grad_norm");
  b.create<func::ReturnOp>(loc, results);
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  trainStep.setFunctionType(b.getFunctionType(argTypes, resultTypes));
  trainStep.setAllResultAttrs(resultAttrs);
}

struct AutodiffPass : public mnemo::impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    DictionaryAttr train = model::trainSettings(module);
    // Nothing to train: a model without a train section is inference-only.
    if (!forward || !train || module.lookupSymbol("train_step"))
      return;
    FailureOr<ForwardSignature> sig = readSignature(forward);
    if (failed(sig))
      return signalPassFailure();
    if (sig->lossResult < 0) {
      forward.emitError() << "the train section names no loss (for example "
                             "'loss = cross_entropy(output, label)')";
      return signalPassFailure();
    }
    FailureOr<Optimizer> optimizer =
        Optimizer::fromSettings(train, forward.getLoc());
    if (failed(optimizer))
      return signalPassFailure();
    SmallVector<StringRef> paramNames;
    SmallVector<Type> paramTypes;
    SmallVector<Location> paramLocs;
    for (unsigned p : sig->params) {
      paramNames.push_back(model::argumentName(forward, p));
      paramTypes.push_back(forward.getArgumentTypes()[p]);
      paramLocs.push_back(forward.getArgument(p).getLoc());
    }
    FailureOr<Pruning> pruning =
        Pruning::fromSettings(train, paramNames, paramTypes, paramLocs);
    if (failed(pruning))
      return signalPassFailure();
    buildEvalStep(module, forward, *sig, train);
    if (failed(TrainStepBuilder(module, forward, *sig, *optimizer, *pruning)
                   .build()))
      return signalPassFailure();
  }

  /// @eval_step(inputs..., targets..., params...) -> (loss[, accuracy]).
  void buildEvalStep(ModuleOp module, func::FuncOp forward,
                     const ForwardSignature &sig, DictionaryAttr train) {
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(forward);
    func::FuncOp eval = llvm::cast<func::FuncOp>(b.clone(*forward));
    eval.setName("eval_step");
    // Evaluation reads the ranges training observed.
    eval.walk([](FakeQuantOp fake) { model::clearObserver(fake); });
    // and runs the model as torch's model.eval() does: dropout is the
    // identity, in attention too.
    SmallVector<DropoutOp> dropouts;
    eval.walk([&](DropoutOp dropout) { dropouts.push_back(dropout); });
    for (DropoutOp dropout : dropouts) {
      dropout.getResult().replaceAllUsesWith(dropout.getInput());
      dropout.erase();
    }
    eval.walk([&](AttentionOp attention) {
      attention.setDropoutP(llvm::APFloat(0.0));
    });
    Block &body = eval.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    // The evaluation forward's results where it has its own (the training
    // forward's ops are then dead here, and canonicalization drops them).
    int lossResult =
        sig.evalLossResult >= 0 ? sig.evalLossResult : sig.lossResult;
    int outputResult =
        sig.evalOutputResult >= 0 ? sig.evalOutputResult : sig.outputResult;
    SmallVector<Value> results{ret.getOperand(lossResult)};
    SmallVector<Type> types{results[0].getType()};
    SmallVector<StringRef> names{"loss"};
    if (isClassification(forward, sig)) {
      b.setInsertionPoint(ret);
      // Positions the loss ignores are not counted either.
      Value targets = body.getArgument(sig.targets[0]);
      int64_t ignoreIndex = -100;
      for (Operation *user : targets.getUsers()) {
        if (auto ce = llvm::dyn_cast<CrossEntropyOp>(user))
          ignoreIndex = int64_t(ce.getIgnoreIndex());
        if (auto ce = llvm::dyn_cast<LinearCrossEntropyOp>(user))
          ignoreIndex = int64_t(ce.getIgnoreIndex());
      }
      Value acc = b.create<AccuracyOp>(
          ret.getLoc(), RankedTensorType::get({}, b.getF32Type()),
          ret.getOperand(outputResult), targets, ignoreIndex);
      results.push_back(acc);
      types.push_back(acc.getType());
      names.push_back("accuracy");
    }
    b.setInsertionPoint(ret);
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    eval.setFunctionType(b.getFunctionType(eval.getArgumentTypes(), types));
    SmallVector<DictionaryAttr> resultAttrs;
    for (StringRef name : names)
      resultAttrs.push_back(
          b.getDictionaryAttr(model::resultNameAttr(b, name)));
    eval.setAllResultAttrs(resultAttrs);
    // The logits exist here for accuracy: a fused loss computes it instead,
    // unless inference compresses the classifier's weight.
    llvm::StringSet<> compressed = compressedParameters(train);
    fuseEvaluationMetrics(eval, [&](LinearCrossEntropyOp loss) {
      Value weight = loss.getWeight();
      while (Operation *def = weight.getDefiningOp()) {
        if (!llvm::isa<CastOp, FakeQuantOp, ApplyMaskOp>(def))
          return false;
        weight = def->getOperand(0);
      }
      auto arg = llvm::cast<BlockArgument>(weight);
      return compressed.contains(model::argumentName(eval, arg.getArgNumber()));
    });
  }

  /// The parameters the train section quantizes or prunes: inference
  /// (CompressWeights) stores them compressed, and runs a product of one
  /// as an int8 or sparse product.
  static llvm::StringSet<> compressedParameters(DictionaryAttr train) {
    llvm::StringSet<> names;
    for (StringRef list : {"quantize", "prune"})
      if (auto entries = train.getAs<ArrayAttr>(list))
        for (Attribute entry : entries)
          for (Attribute p :
               llvm::cast<DictionaryAttr>(entry).getAs<ArrayAttr>("params"))
            names.insert(llvm::cast<StringAttr>(p).getValue());
    return names;
  }
};

} // namespace
