//===- FuseLinearCrossEntropy.cpp - The classifier's product into its loss ===//
//
// See Passes.td (FuseLinearCrossEntropy). cross_entropy(h @ W^T) (a tied
// embedding table, or a Linear without bias) or cross_entropy(h @ W)
// becomes one mnemo.linear_cross_entropy that computes the logits a chunk
// of rows at a time (LossesKernels.h's classifierChunkRows), so neither the
// [rows, classes] logits nor their gradient is ever whole. Where the
// forward also returns the logits (the model's output), the product stays
// for that result: the training step does not read it and drops it, and
// the evaluation step, which reports accuracy from it, takes its loss from
// those logits again (readLossFromLogits).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "lang/MnemoOps.h"
#include "lang/OpVerification.h"
#include "lang/ops/losses/LossesKernels.h"

#include "mlir/IR/Builders.h"

namespace mnemo {
#define GEN_PASS_DEF_FUSELINEARCROSSENTROPY
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

/// The product cross_entropy reads, when the fused op can take it: a
/// matrix product of rows by a 2-D weight whose logits nothing else reads
/// but the function's return.
MatmulOp fusableProduct(CrossEntropyOp loss) {
  auto product = loss.getLogits().getDefiningOp<MatmulOp>();
  if (!product || product.getTransposeLhs() ||
      verification::tensorType(product.getRhs()).getRank() != 2 ||
      verification::tensorType(product.getLhs()).getRank() < 2)
    return nullptr;
  for (Operation *user : product.getResult().getUsers())
    if (user != loss.getOperation() && !llvm::isa<func::ReturnOp>(user))
      return nullptr;
  return product;
}

struct FuseLinearCrossEntropyPass
    : public mnemo::impl::FuseLinearCrossEntropyBase<
          FuseLinearCrossEntropyPass> {
  using FuseLinearCrossEntropyBase::FuseLinearCrossEntropyBase;
  void runOnOperation() override {
    auto forward = getOperation().lookupSymbol<func::FuncOp>("forward");
    if (!forward)
      return;
    SmallVector<CrossEntropyOp> losses;
    forward.walk([&](CrossEntropyOp op) { losses.push_back(op); });
    OpBuilder builder(&getContext());
    for (CrossEntropyOp loss : losses) {
      MatmulOp product = fusableProduct(loss);
      if (!product)
        continue;
      Value hidden = product.getLhs(), weight = product.getRhs();
      ArrayRef<int64_t> h = verification::tensorType(hidden).getShape();
      int64_t dim = h.back(),
              rows = verification::tensorType(hidden).getNumElements() / dim,
              classes =
                  verification::tensorType(loss.getLogits()).getShape().back();
      builder.setInsertionPoint(loss);
      auto fused = builder.create<LinearCrossEntropyOp>(
          loss.getLoc(),
          TypeRange{loss.getType(),
                    RankedTensorType::get(h.drop_back(), builder.getF32Type())},
          hidden, weight, loss.getTargets(),
          builder.getBoolAttr(product.getTransposeRhs()),
          builder.getI64IntegerAttr(
              losses::classifierChunkRows(rows, dim, classes, minChunkRows)),
          loss.getIgnoreIndexAttr(), loss.getLabelSmoothingAttr());
      loss.getResult().replaceAllUsesWith(fused.getResult());
      loss.erase();
      if (product.getResult().use_empty())
        product.erase();
    }
  }
};

} // namespace

void mnemo::readLossFromLogits(func::FuncOp func) {
  SmallVector<LinearCrossEntropyOp> fused;
  func.walk([&](LinearCrossEntropyOp op) { fused.push_back(op); });
  for (LinearCrossEntropyOp op : fused) {
    if (!op.getLogSumExp().use_empty())
      continue;
    MatmulOp product;
    for (Operation *user : op.getHidden().getUsers())
      if (auto m = llvm::dyn_cast<MatmulOp>(user);
          m && m.getRhs() == op.getWeight() && !m.getTransposeLhs() &&
          m.getTransposeRhs() == op.getTransposeWeight())
        product = m;
    if (!product || product.getResult().use_empty())
      continue;
    // The loss after the product (both precede the return).
    if (op->isBeforeInBlock(product))
      op->moveAfter(product);
    OpBuilder builder(op);
    // cross_entropy computes in f32 (amp has run: the logits may be 16-bit;
    // CSE merges this cast with the one the output already has).
    Value logits = product.getResult();
    auto type = llvm::cast<RankedTensorType>(logits.getType());
    if (!type.getElementType().isF32())
      logits = builder.create<CastOp>(op.getLoc(),
                                      type.clone(builder.getF32Type()), logits);
    auto loss = builder.create<CrossEntropyOp>(
        op.getLoc(), op.getResult().getType(), logits, op.getTargets(),
        op.getIgnoreIndexAttr(), op.getLabelSmoothingAttr());
    op.getResult().replaceAllUsesWith(loss.getResult());
    op.erase();
  }
}
