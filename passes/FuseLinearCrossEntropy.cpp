//===- FuseLinearCrossEntropy.cpp - The classifier's product into its loss ===//
//
// See Passes.td (FuseLinearCrossEntropy). cross_entropy(h @ W^T) (a tied
// embedding table, or a Linear without bias) or cross_entropy(h @ W)
// becomes one mnemo.linear_cross_entropy that computes the logits a chunk
// of rows at a time (LossesKernels.h's classifierChunkRows), so neither the
// [rows, classes] logits nor their gradient is ever whole. A head with a
// bias (h @ W^T + b: a Linear, BERT's decoder) fuses too where its logits
// outgrow one chunk; below that the fused op would hold them whole in its
// workspace anyway and only trade memory of the size of its input for a
// second product, so a small classifier (ten classes) keeps its plain
// product and bias add. Where the forward also returns the logits (the
// model's output), the product stays for that result: the training step
// does not read it and drops it. The evaluation step reports accuracy from
// it: there the fused op takes the accuracy over (a third result), and the
// logits go; where they must stay (inference runs a compressed classifier
// weight as its own product), the loss reads them (fuseEvaluationMetrics).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "lang/MnemoOps.h"
#include "lang/OpVerification.h"
#include "lang/ops/losses/LossesKernels.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mnemo {
#define GEN_PASS_DEF_FUSELINEARCROSSENTROPY
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

/// A classifier head: its product, and its bias add and bias (null for
/// none).
struct Classifier {
  MatmulOp product;
  AddOp biasAdd;
  Value bias; // [classes]
};

bool readOnlyByLossOrReturn(Value logits, CrossEntropyOp loss) {
  return llvm::all_of(logits.getUsers(), [&](Operation *user) {
    return user == loss.getOperation() || llvm::isa<func::ReturnOp>(user);
  });
}

/// `v`'s product, if it is one of rows by a 2-D weight.
MatmulOp classifierProduct(Value v) {
  auto product = v.getDefiningOp<MatmulOp>();
  if (!product || product.getTransposeLhs() ||
      verification::tensorType(product.getRhs()).getRank() != 2 ||
      verification::tensorType(product.getLhs()).getRank() < 2)
    return nullptr;
  return product;
}

/// The head whose logits cross_entropy reads, when the fused op can take
/// it: a product of rows by a 2-D weight, with or without a bias of the
/// classes added (`add(product, broadcast(bias))`, either way round), whose
/// logits nothing else reads but the function's return.
std::optional<Classifier> fusableClassifier(CrossEntropyOp loss) {
  Value logits = loss.getLogits();
  if (!readOnlyByLossOrReturn(logits, loss))
    return std::nullopt;
  if (MatmulOp product = classifierProduct(logits))
    return Classifier{product, nullptr, nullptr};
  auto add = logits.getDefiningOp<AddOp>();
  if (!add)
    return std::nullopt;
  for (auto [p, b] : {std::pair(add.getLhs(), add.getRhs()),
                      std::pair(add.getRhs(), add.getLhs())}) {
    MatmulOp product = classifierProduct(p);
    auto broadcast = b.getDefiningOp<BroadcastOp>();
    if (!product || !p.hasOneUse() || !broadcast)
      continue;
    Value bias = broadcast.getInput();
    RankedTensorType type = verification::tensorType(bias);
    int64_t classes = verification::tensorType(logits).getShape().back();
    if (type.getRank() == 1 && type.getShape()[0] == classes &&
        type.getElementType() == verification::tensorType(p).getElementType())
      return Classifier{product, add, bias};
  }
  return std::nullopt;
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
      std::optional<Classifier> head = fusableClassifier(loss);
      if (!head)
        continue;
      MatmulOp product = head->product;
      Value hidden = product.getLhs(), weight = product.getRhs();
      ArrayRef<int64_t> h = verification::tensorType(hidden).getShape();
      int64_t dim = h.back(),
              rows = verification::tensorType(hidden).getNumElements() / dim,
              classes =
                  verification::tensorType(loss.getLogits()).getShape().back(),
              chunkRows =
                  losses::classifierChunkRows(rows, dim, classes, minChunkRows);
      if (head->bias && chunkRows >= rows)
        continue;
      builder.setInsertionPoint(loss);
      auto fused = builder.create<LinearCrossEntropyOp>(
          loss.getLoc(),
          TypeRange{loss.getType(),
                    RankedTensorType::get(h.drop_back(), builder.getF32Type())},
          hidden, weight, loss.getTargets(), head->bias,
          builder.getBoolAttr(product.getTransposeRhs()),
          builder.getI64IntegerAttr(chunkRows), loss.getIgnoreIndexAttr(),
          loss.getLabelSmoothingAttr());
      loss.getResult().replaceAllUsesWith(fused.getResult());
      loss.erase();
      // What only the loss read goes with it.
      for (Operation *op :
           {head->biasAdd.getOperation(), product.getOperation()})
        if (op && op->use_empty()) {
          SmallVector<Value> operands(op->getOperands());
          op->erase();
          for (Value operand : operands)
            if (auto broadcast = operand.getDefiningOp<BroadcastOp>();
                broadcast && broadcast->use_empty())
              broadcast.erase();
        }
    }
  }
};

/// `v` before any casts amp put on it.
Value withoutCasts(Value v) {
  while (auto cast = v.getDefiningOp<CastOp>())
    v = cast.getInput();
  return v;
}

/// The logits `op`'s function still writes out for another reader (the
/// model's output, which the evaluation step's accuracy reads): the
/// product of its hidden states and weight, or that product's bias add;
/// null where there are none.
Operation *writtenOutLogits(LinearCrossEntropyOp op) {
  MatmulOp product;
  for (Operation *user : op.getHidden().getUsers())
    if (auto m = llvm::dyn_cast<MatmulOp>(user);
        m && m.getRhs() == op.getWeight() && !m.getTransposeLhs() &&
        m.getTransposeRhs() == op.getTransposeWeight())
      product = m;
  if (!product || product.getResult().use_empty())
    return nullptr;
  if (!op.getBias())
    return product;
  // With a bias, the logits are the product's bias add (amp may have cast
  // the bias on either side of its broadcast: a bf16 product adds
  // cast(broadcast(bias)) in bf16).
  for (Operation *user : product.getResult().getUsers())
    if (auto add = llvm::dyn_cast<AddOp>(user))
      for (Value operand : add->getOperands())
        if (auto broadcast = withoutCasts(operand).getDefiningOp<BroadcastOp>();
            broadcast &&
            withoutCasts(broadcast.getInput()) == withoutCasts(op.getBias()))
          return add;
  return nullptr;
}

/// The accuracy ops that read `logits` (through amp's casts), when they are
/// all that does and they count what `loss` counts; false otherwise.
bool onlyAccuracyReads(Value logits, LinearCrossEntropyOp loss,
                       SmallVectorImpl<AccuracyOp> &accuracies) {
  for (Operation *user : logits.getUsers()) {
    if (auto cast = llvm::dyn_cast<CastOp>(user)) {
      if (!onlyAccuracyReads(cast.getResult(), loss, accuracies))
        return false;
      continue;
    }
    auto accuracy = llvm::dyn_cast<AccuracyOp>(user);
    if (!accuracy || accuracy.getTargets() != loss.getTargets() ||
        accuracy.getIgnoreIndex() != loss.getIgnoreIndex())
      return false;
    accuracies.push_back(accuracy);
  }
  return !accuracies.empty();
}

/// The loss reports the accuracy too, chunk by chunk, and the accuracy ops
/// go (their logits, read by nothing else now, are dead).
void takeOverAccuracy(LinearCrossEntropyOp op,
                      ArrayRef<AccuracyOp> accuracies) {
  OpBuilder builder(op);
  // The accuracy is an f32 scalar, as the loss is.
  Type scalar = op.getResult().getType();
  auto fused = builder.create<LinearCrossEntropyOp>(
      op.getLoc(), TypeRange{scalar, op.getLogSumExp().getType(), scalar},
      op.getHidden(), op.getWeight(), op.getTargets(), op.getBias(),
      op.getTransposeWeightAttr(), op.getChunkRowsAttr(),
      op.getIgnoreIndexAttr(), op.getLabelSmoothingAttr());
  op.getResult().replaceAllUsesWith(fused.getResult());
  op.getLogSumExp().replaceAllUsesWith(fused.getLogSumExp());
  op.erase();
  for (AccuracyOp accuracy : accuracies) {
    accuracy.getResult().replaceAllUsesWith(fused.getAccuracy());
    accuracy.erase();
  }
}

/// The loss reads the logits written out anyway: cross_entropy of them,
/// with no second product.
void readLossFromLogits(LinearCrossEntropyOp op, Operation *logitsOp) {
  // The loss after the logits (both precede the return).
  if (op->isBeforeInBlock(logitsOp))
    op->moveAfter(logitsOp);
  OpBuilder builder(op);
  // cross_entropy computes in f32 (amp has run: the logits may be 16-bit;
  // CSE merges this cast with the one the output already has).
  Value logits = logitsOp->getResult(0);
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

} // namespace

void mnemo::fuseEvaluationMetrics(
    func::FuncOp func,
    llvm::function_ref<bool(LinearCrossEntropyOp)> keepLogits) {
  SmallVector<LinearCrossEntropyOp> fused;
  func.walk([&](LinearCrossEntropyOp op) { fused.push_back(op); });
  for (LinearCrossEntropyOp op : fused) {
    if (!op.getLogSumExp().use_empty())
      continue;
    Operation *logitsOp = writtenOutLogits(op);
    if (!logitsOp)
      continue;
    SmallVector<AccuracyOp> accuracies;
    if (!keepLogits(op) &&
        onlyAccuracyReads(logitsOp->getResult(0), op, accuracies))
      takeOverAccuracy(op, accuracies);
    else
      readLossFromLogits(op, logitsOp);
  }
  // What only the accuracies read (the logits, their casts, the product
  // and bias add), backwards so that a value's readers go before it.
  for (Block &block : func.getBody())
    for (Operation &op :
         llvm::make_early_inc_range(llvm::reverse(block.getOperations())))
      if (op.use_empty() && mlir::isPure(&op) &&
          !op.hasTrait<OpTrait::IsTerminator>())
        op.erase();
}
