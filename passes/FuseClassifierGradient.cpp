//===- FuseClassifierGradient.cpp - The classifier loss's gradient in one pass
////
//
// See Passes.td (FuseClassifierGradient). After autodiff, the training
// step computes the fused classifier loss (linear_cross_entropy) in the
// forward and its gradient (linear_cross_entropy_grad) at the start of the
// backward, which runs the head's product a second time for the logits it
// turns into their gradient. Where the gradient reaching the loss is known
// before the loss runs (the step's seed: a constant, or an argument such
// as a loss scale), the two become one linear_cross_entropy_with_grad at
// the loss's place, which turns each chunk's logits into their gradient as
// soon as it has their rows' loss: one product fewer (Liger-Kernel's fused
// linear cross-entropy does the same). The gradients then exist from the
// end of the forward instead of the start of the backward: the loss is the
// forward's last op, so nothing lies between.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "lang/MnemoOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace mnemo {
#define GEN_PASS_DEF_FUSECLASSIFIERGRADIENT
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

/// Whether `grad` is the gradient of `loss` with its operands and options,
/// and `loss`'s log-sum-exp is for nothing else.
bool isGradientOf(LinearCrossEntropyGradOp grad, LinearCrossEntropyOp loss) {
  return !loss.getAccuracy() && loss.getLogSumExp().hasOneUse() &&
         grad.getHidden() == loss.getHidden() &&
         grad.getWeight() == loss.getWeight() &&
         grad.getTargets() == loss.getTargets() &&
         grad.getBias() == loss.getBias() &&
         grad.getTransposeWeight() == loss.getTransposeWeight() &&
         grad.getChunkRows() == loss.getChunkRows() &&
         grad.getIgnoreIndex() == loss.getIgnoreIndex() &&
         grad.getLabelSmoothing() == loss.getLabelSmoothing();
}

struct FuseClassifierGradientPass
    : public mnemo::impl::FuseClassifierGradientBase<
          FuseClassifierGradientPass> {
  void runOnOperation() override {
    SmallVector<LinearCrossEntropyGradOp> grads;
    getOperation().walk(
        [&](LinearCrossEntropyGradOp op) { grads.push_back(op); });
    OpBuilder builder(&getContext());
    for (LinearCrossEntropyGradOp grad : grads) {
      auto loss = grad.getLogSumExp().getDefiningOp<LinearCrossEntropyOp>();
      if (!loss || !isGradientOf(grad, loss))
        continue;
      // The loss's gradient must exist where the loss runs.
      DominanceInfo dominance(loss->getParentOp());
      if (!dominance.properlyDominates(grad.getGrad(), loss))
        continue;
      builder.setInsertionPoint(loss);
      SmallVector<Type> types{loss.getResult().getType(),
                              grad.getHiddenGrad().getType(),
                              grad.getWeightGrad().getType()};
      if (grad.getBiasGrad())
        types.push_back(grad.getBiasGrad().getType());
      auto fused = builder.create<LinearCrossEntropyWithGradOp>(
          loss.getLoc(), types, grad.getGrad(), loss.getHidden(),
          loss.getWeight(), loss.getTargets(), loss.getBias(),
          loss.getTransposeWeightAttr(), loss.getChunkRowsAttr(),
          loss.getIgnoreIndexAttr(), loss.getLabelSmoothingAttr());
      loss.getResult().replaceAllUsesWith(fused.getResult());
      grad.getHiddenGrad().replaceAllUsesWith(fused.getHiddenGrad());
      grad.getWeightGrad().replaceAllUsesWith(fused.getWeightGrad());
      if (grad.getBiasGrad())
        grad.getBiasGrad().replaceAllUsesWith(fused.getBiasGrad());
      grad.erase();
      loss.erase();
    }
  }
};

} // namespace
