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
    buildEvalStep(module, forward, *sig);
    if (failed(buildTrainStep(module, forward, *sig, *optimizer, *pruning)))
      return signalPassFailure();
  }

  /// @eval_step(inputs..., targets..., params...) -> (loss[, accuracy]).
  void buildEvalStep(ModuleOp module, func::FuncOp forward,
                     const ForwardSignature &sig) {
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
    // The logits exist here for accuracy: a fused loss reads them.
    readLossFromLogits(eval);
  }

  LogicalResult buildTrainStep(ModuleOp module, func::FuncOp forward,
                               const ForwardSignature &sig,
                               const Optimizer &optimizer,
                               const Pruning &pruning) {
    MLIRContext *ctx = module.getContext();
    OpBuilder b(ctx);
    // The step and the run's length: 64-bit, as a run may be longer than
    // 2^31 steps.
    auto i64 = RankedTensorType::get({}, b.getI64Type());

    // The signature: params, then each state of each param, then the batch,
    // then step and total_steps.
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    auto attrs = [&](ArgumentRole role, StringRef name, DictionaryAttr init) {
      return model::argumentAttrs(b, role, name, init);
    };
    for (unsigned p : sig.params) {
      argTypes.push_back(forward.getArgumentTypes()[p]);
      argAttrs.push_back(attrs(ArgumentRole::Param,
                               model::argumentName(forward, p),
                               model::argumentInit(forward, p)));
    }
    // Buffers next, in the forward's order: @eval_step lays out the
    // parameters region the same way.
    unsigned bufferStart = argTypes.size();
    for (unsigned i : sig.buffers) {
      argTypes.push_back(forward.getArgumentTypes()[i]);
      argAttrs.push_back(forward.getArgAttrDict(i));
    }
    auto zeros =
        b.getDictionaryAttr({b.getNamedAttr("kind", b.getStringAttr("zeros"))});
    // Each parameter's state, in order; stateStart[k] is its first state
    // argument (the count differs per parameter with adamw8bit).
    SmallVector<unsigned> stateStart;
    for (unsigned p : sig.params) {
      stateStart.push_back(argTypes.size());
      for (auto &[state, type] :
           optimizer.stateFor(forward.getArgumentTypes()[p])) {
        argTypes.push_back(type);
        argAttrs.push_back(attrs(
            ArgumentRole::OptState,
            (model::argumentName(forward, p) + "." + state).str(), zeros));
      }
    }
    stateStart.push_back(argTypes.size());
    // Each pruned parameter's mask, one bit per element (set: pruned).
    SmallVector<int> maskArg(sig.params.size(), -1);
    for (auto [k, p] : llvm::enumerate(sig.params)) {
      if (!pruning.prunes(k))
        continue;
      maskArg[k] = int(argTypes.size());
      argTypes.push_back(pruning.maskType(forward.getArgumentTypes()[p]));
      argAttrs.push_back(
          attrs(ArgumentRole::OptState,
                (model::argumentName(forward, p) + ".mask").str(), zeros));
    }
    // f16 trains with dynamic loss scaling (GradScaler's constants): the
    // scale and the count of finite steps are optimizer state, kept with
    // the parameters on the device and in checkpoints.
    auto moduleOp = forward->getParentOfType<ModuleOp>();
    bool lossScaling = model::precision(moduleOp) == "f16";
    auto scalarF32 = RankedTensorType::get({}, b.getF32Type());
    unsigned scaleArg = 0;
    if (lossScaling) {
      scaleArg = argTypes.size();
      argTypes.push_back(scalarF32);
      argAttrs.push_back(
          attrs(ArgumentRole::OptState, "loss_scale",
                b.getDictionaryAttr(
                    {b.getNamedAttr("kind", b.getStringAttr("constant")),
                     b.getNamedAttr("value", b.getF64FloatAttr(65536.0))})));
      argTypes.push_back(scalarF32);
      argAttrs.push_back(
          attrs(ArgumentRole::OptState, "loss_scale.growth", zeros));
    }
    unsigned batchStart = argTypes.size();
    for (ArrayRef<unsigned> group :
         {ArrayRef<unsigned>(sig.inputs), ArrayRef<unsigned>(sig.targets)})
      for (unsigned i : group) {
        argTypes.push_back(forward.getArgumentTypes()[i]);
        argAttrs.push_back(forward.getArgAttrDict(i));
      }
    argTypes.push_back(i64);
    argAttrs.push_back(attrs(ArgumentRole::Step, "step", {}));
    argTypes.push_back(i64);
    argAttrs.push_back(attrs(ArgumentRole::TotalSteps, "total_steps", {}));

    b.setInsertionPointToEnd(module.getBody());
    auto trainStep = b.create<func::FuncOp>(forward.getLoc(), "train_step",
                                            b.getFunctionType(argTypes, {}));
    Block *body = trainStep.addEntryBlock();
    // At once: one setArgAttrs per argument rebuilds the whole list each
    // time, quadratic in the arguments (a 10,000-layer model's 20,000).
    trainStep.setAllArgAttrs(argAttrs);

    // The forward, with its arguments mapped to the new ones.
    IRMapping map;
    Block &fwdBody = forward.getBody().front();
    for (auto [k, p] : llvm::enumerate(sig.params)) {
      map.map(fwdBody.getArgument(p), body->getArgument(k));
      body->getArgument(k).setLoc(fwdBody.getArgument(p).getLoc());
    }
    for (auto [k, i] : llvm::enumerate(sig.buffers)) {
      map.map(fwdBody.getArgument(i), body->getArgument(bufferStart + k));
      body->getArgument(bufferStart + k)
          .setLoc(fwdBody.getArgument(i).getLoc());
    }
    unsigned next = batchStart;
    for (ArrayRef<unsigned> group :
         {ArrayRef<unsigned>(sig.inputs), ArrayRef<unsigned>(sig.targets)})
      for (unsigned i : group) {
        map.map(fwdBody.getArgument(i), body->getArgument(next));
        body->getArgument(next++).setLoc(fwdBody.getArgument(i).getLoc());
      }
    b.setInsertionPointToEnd(body);
    SmallVector<Operation *> forwardOps;
    auto fwdReturn = llvm::cast<func::ReturnOp>(fwdBody.getTerminator());
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
    Value loss = map.lookup(fwdReturn.getOperand(sig.lossResult));
    // Training observes what it fake-quantizes: each observed range is
    // updated before its fake-quant reads it, and written back.
    Value step = body->getArgument(argTypes.size() - 2);
    llvm::DenseMap<unsigned, Value> bufferUpdates;
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
    // What the forward leaves in the buffers it updates (running
    // statistics), written back as the step's results.
    for (auto [result, arg] : sig.bufferUpdates) {
      unsigned k = llvm::find(sig.buffers, arg) - sig.buffers.begin();
      bufferUpdates[bufferStart + k] = map.lookup(fwdReturn.getOperand(result));
    }
    b.setInsertionPointToEnd(body);

    // The backward: seed d(loss)/d(loss) = 1, then each op's rule, in
    // reverse program order.
    // (With loss scaling, the seed is the scale: every gradient comes out
    // scaled, and f16's small gradients stay representable.)
    auto lossType = llvm::cast<RankedTensorType>(loss.getType());
    Value seed =
        lossScaling ? Value(body->getArgument(scaleArg))
                    : Value(b.create<ConstantOp>(
                          loss.getLoc(),
                          DenseElementsAttr::get(
                              lossType,
                              b.getFloatAttr(lossType.getElementType(), 1.0))));
    FailureOr<llvm::DenseMap<Value, Value>> grads =
        buildBackward(b, forwardOps, loss, seed);
    if (failed(grads))
      return failure();

    // Gradients of the parameters; a parameter that never reaches the loss
    // keeps its value and state.
    b.setInsertionPointToEnd(body);
    Location loc = forward.getLoc();
    unsigned numParams = sig.params.size();
    SmallVector<Value> paramGrads;
    for (unsigned k = 0; k < numParams; ++k) {
      Value g = grads->lookup(body->getArgument(k));
      if (!g)
        emitWarning(fwdBody.getArgument(sig.params[k]).getLoc())
            << "parameter '" << model::argumentName(forward, sig.params[k])
            << "' does not reach the loss; it is not trained";
      // A pruned element's gradient is zero, so its optimizer state stays
      // zero and it stays pruned.
      if (g && maskArg[k] >= 0)
        g = Pruning::apply(b, g.getLoc(), g, body->getArgument(maskArg[k]));
      paramGrads.push_back(g);
    }
    SmallVector<Value> present;
    for (Value g : paramGrads)
      if (g)
        present.push_back(g);
    auto f32 = RankedTensorType::get({}, b.getF32Type());
    Value gradNorm =
        present.empty()
            ? b.create<ConstantOp>(loc, DenseElementsAttr::get(f32, 0.0f))
                  .getResult()
            : b.create<GlobalNormOp>(loc, f32, present).getResult();
    // Loss scaling: the scaled norm decides (an overflow makes it inf or
    // NaN); the gradients are unscaled by 1/scale, folded into the clipping
    // factor when there is one.
    Value skip, newScale, newGrowth, unscale;
    if (lossScaling) {
      Value scale = body->getArgument(scaleArg),
            growth = body->getArgument(scaleArg + 1);
      // Read the scale before its update (which may be written in place).
      unscale = b.create<DivOp>(
          loc, f32,
          b.create<ConstantOp>(loc, DenseElementsAttr::get(f32, 1.0f)), scale);
      auto update = b.create<LossScaleUpdateOp>(
          loc, f32, f32, f32, gradNorm, scale, growth, b.getF64FloatAttr(2.0),
          b.getF64FloatAttr(0.5), b.getI64IntegerAttr(2000));
      newScale = update.getNewScale();
      newGrowth = update.getNewCount();
      skip = update.getSkip();
      gradNorm = b.create<MulOp>(loc, f32, gradNorm, unscale);
    }
    Value gradFactor = unscale;
    if (optimizer.clipNorm && !present.empty()) {
      Value coefficient = b.create<ClipCoefficientOp>(
          loc, f32, gradNorm, b.getF64FloatAttr(*optimizer.clipNorm));
      gradFactor = unscale
                       ? Value(b.create<MulOp>(loc, f32, coefficient, unscale))
                       : coefficient;
    }
    if (gradFactor && !present.empty()) {
      Value coefficient = gradFactor;
      for (Value &g : paramGrads) {
        if (!g)
          continue;
        auto type = llvm::cast<RankedTensorType>(g.getType());
        Value c = coefficient;
        if (type.getElementType() != f32.getElementType())
          c = b.create<CastOp>(
              loc, RankedTensorType::get({}, type.getElementType()), c);
        g = b.create<MulOp>(loc, type, g, b.create<BroadcastOp>(loc, type, c));
      }
    }
    Value totalSteps = body->getArgument(argTypes.size() - 1);
    Value lr = optimizer.learningRate(b, loc, step, totalSteps);

    SmallVector<Value> newParams(numParams);
    SmallVector<SmallVector<Value>> newStateOf(numParams);
    for (unsigned k = 0; k < numParams; ++k) {
      Value param = body->getArgument(k);
      ValueRange state = body->getArguments().slice(
          stateStart[k], stateStart[k + 1] - stateStart[k]);
      if (!paramGrads[k]) {
        newParams[k] = param;
        newStateOf[k].append(state.begin(), state.end());
        continue;
      }
      Location paramLoc = fwdBody.getArgument(sig.params[k]).getLoc();
      SmallVector<Value> updated = optimizer.update(
          b, paramLoc, param, paramGrads[k], state, lr, step, skip);
      newParams[k] = updated[0];
      newStateOf[k].append(updated.begin() + 1, updated.end());
    }
    // Pruning: new masks from the updated weights, then the weights and
    // the state of their shape (moments, 8-bit codes) masked by them.
    SmallVector<Value> newMasks;
    if (!pruning.empty()) {
      SmallVector<Value> masks(numParams);
      for (unsigned k = 0; k < numParams; ++k)
        if (maskArg[k] >= 0)
          masks[k] = body->getArgument(maskArg[k]);
      SmallVector<Value> updated;
      newMasks = pruning.updateMasks(b, loc, step, newParams, masks, updated);
      for (unsigned k = 0; k < numParams; ++k) {
        if (!newMasks[k])
          continue;
        Location paramLoc = fwdBody.getArgument(sig.params[k]).getLoc();
        auto shape = llvm::cast<ShapedType>(newParams[k].getType()).getShape();
        // Only after a step that changed the masks: otherwise the masked
        // gradient has kept them zero where pruned.
        newParams[k] =
            Pruning::apply(b, paramLoc, newParams[k], newMasks[k], updated[k]);
        for (Value &s : newStateOf[k])
          if (llvm::cast<ShapedType>(s.getType()).getShape() == shape)
            s = Pruning::apply(b, paramLoc, s, newMasks[k], updated[k]);
      }
    }
    SmallVector<Value> newStates;
    for (ArrayRef<Value> states : newStateOf)
      newStates.append(states.begin(), states.end());

    // (loss, new params..., new state..., lr, grad_norm); updated tensors
    // may be written into the buffers of the arguments they replace.
    SmallVector<Value> results{loss};
    SmallVector<DictionaryAttr> resultAttrs{
        b.getDictionaryAttr(model::resultNameAttr(b, "loss"))};
    auto updatedAttr = [&](unsigned argIndex) {
      return b.getDictionaryAttr(
          {model::resultNameAttr(b, model::argumentName(trainStep, argIndex)),
           plan::reusedArgumentAttr(b, argIndex)});
    };
    for (unsigned k = 0; k < numParams; ++k) {
      results.push_back(newParams[k]);
      resultAttrs.push_back(updatedAttr(k));
    }
    for (unsigned s = 0; s < newStates.size(); ++s) {
      results.push_back(newStates[s]);
      resultAttrs.push_back(updatedAttr(stateStart.front() + s));
    }
    for (unsigned k = 0; k < sig.buffers.size(); ++k)
      if (Value updated = bufferUpdates.lookup(bufferStart + k)) {
        results.push_back(updated);
        resultAttrs.push_back(updatedAttr(bufferStart + k));
      }
    for (unsigned k = 0; k < numParams; ++k)
      if (maskArg[k] >= 0) {
        results.push_back(newMasks[k]);
        resultAttrs.push_back(updatedAttr(maskArg[k]));
      }
    if (lossScaling) {
      results.push_back(newScale);
      resultAttrs.push_back(updatedAttr(scaleArg));
      results.push_back(newGrowth);
      resultAttrs.push_back(updatedAttr(scaleArg + 1));
    }
    results.push_back(lr);
    resultAttrs.push_back(b.getDictionaryAttr(model::resultNameAttr(b, "lr")));
    if (lossScaling) {
      // 1 when the step was skipped; the trainer counts them.
      results.push_back(skip);
      resultAttrs.push_back(
          b.getDictionaryAttr(model::resultNameAttr(b, "skipped")));
    }
    results.push_back(gradNorm);
    resultAttrs.push_back(
        b.getDictionaryAttr(model::resultNameAttr(b, "grad_norm")));
    b.create<func::ReturnOp>(loc, results);
    SmallVector<Type> resultTypes;
    for (Value v : results)
      resultTypes.push_back(v.getType());
    trainStep.setFunctionType(b.getFunctionType(argTypes, resultTypes));
    trainStep.setAllResultAttrs(resultAttrs);
    return success();
  }
};

} // namespace
