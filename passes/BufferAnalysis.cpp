//===- BufferAnalysis.cpp - Which values need memory, and when ------------===//

#include "passes/BufferAnalysis.h"
#include "lang/MnemoOps.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"
#include "passes/Fusion.h"
#include "passes/Pruning.h"

#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mnemo;

const char *mnemo::spell(BufferKind kind) {
  switch (kind) {
  case BufferKind::Activation:
    return "activation";
  case BufferKind::Gradient:
    return "gradient";
  case BufferKind::Temporary:
    return "temporary";
  }
  return "?";
}

static int64_t elementBytes(Type type) {
  Type element = llvm::cast<RankedTensorType>(type).getElementType();
  return element.isInteger(64)                                          ? 8
         : element.isF32() || element.isInteger(32)                     ? 4
         : element.isF16() || element.isBF16() || element.isInteger(16) ? 2
                                                                        : 1;
}

int64_t mnemo::storageBytes(Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  return alignUp(tensor.getNumElements() * elementBytes(type));
}

std::string mnemo::tensorTypeString(Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << tensor.getElementType() << "[";
  for (int64_t i = 0; i < tensor.getRank(); ++i)
    os << (i ? "," : "") << tensor.getDimSize(i);
  os << "]";
  return os.str();
}

SmallVector<func::FuncOp> mnemo::stepFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> steps;
  for (StringRef name : {"train_step", "eval_step"})
    if (auto func = module.lookupSymbol<func::FuncOp>(name))
      steps.push_back(func);
  return steps;
}

/// The values a fused loop rooted at `op` reads at its own loop index: its
/// operands, and through fused producers theirs, but not what a fused
/// broadcast reads (at other indices). Only these may share the result's
/// buffer.
static void sameIndexInputs(Operation *op, SmallVectorImpl<Value> &inputs) {
  for (Value operand : op->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (def && isFused(def)) {
      if (!llvm::isa<BroadcastOp>(def))
        sameIndexInputs(def, inputs);
      continue;
    }
    inputs.push_back(operand);
  }
}

/// Whether every consumer of `v` can read it through strides (the backends'
/// GEMMs, their elementwise loops, and a reshape, which then copies): only
/// then is a transpose left as a view.
static bool readsStrided(Value v) {
  for (Operation *user : v.getUsers())
    if (!llvm::isa<MatmulOp, BatchMatmulOp, ReshapeOp, BroadcastOp>(user) &&
        !isElementwiseKernel(user))
      return false;
  return true;
}

FailureOr<BufferAnalysis> BufferAnalysis::analyzePlanned(func::FuncOp func) {
  if (failed(plan::checkPlanned(func)))
    return failure();
  return analyze(func);
}

namespace {

/// The analysis of one step function, in the order its ops run: where each
/// value lives (an argument it updates in place, an operand's buffer that
/// dies where it is made, a buffer of its own, or nowhere for constants
/// and fused ops), each buffer's interval, and its kind.
class BufferAnalyzer {
public:
  explicit BufferAnalyzer(func::FuncOp func)
      : func(func), body(func.getBody().front()),
        ret(llvm::cast<func::ReturnOp>(body.getTerminator())) {
    for (Operation &op : body.without_terminator()) {
      index[&op] = a.order.size();
      a.order.push_back(&op);
    }
    end = a.order.size(); // the return
  }

  FailureOr<BufferAnalysis> run() {
    if (failed(findInPlaceUpdates()))
      return failure();
    for (BlockArgument arg : body.getArguments())
      a.placement[arg] = {Placement::Where::Argument, -1, arg.getArgNumber()};
    for (Operation *op : a.order)
      place(op);
    for (size_t b = 0; b < a.buffers.size(); ++b)
      a.buffers[b].interval.end =
          std::max(a.buffers[b].interval.start, bufferEnd(b));
    classifyBuffers();
    return std::move(a);
  }

private:
  int64_t lastUse(Value v);
  LogicalResult findInPlaceUpdates();
  int64_t bufferEnd(int buffer);
  void newBuffer(Value v, int64_t step);
  bool placeView(Operation *op);
  bool reuseOperandBuffer(Operation *op, Value result, int64_t step);
  void place(Operation *op);
  void classifyBuffers();

  func::FuncOp func;
  Block &body;
  func::ReturnOp ret;
  BufferAnalysis a;
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t end = 0;
  // Memoized: the order is fixed here, and a value that thousands of ops
  // read (a learning rate, a step) is asked about once per buffer it meets.
  llvm::DenseMap<Value, int64_t> lastUses;
  // Results that update an argument in place.
  llvm::DenseMap<Value, unsigned> updates;
};

/// The last op that reads `v`: `end` for the return.
int64_t BufferAnalyzer::lastUse(Value v) {
  auto known = lastUses.find(v);
  if (known != lastUses.end())
    return known->second;
  int64_t last = -1;
  SmallVector<Operation *> roots;
  for (Operation *user : v.getUsers()) {
    if (user == ret.getOperation()) {
      last = std::max(last, end);
      continue;
    }
    // A fused op runs inside its roots' loops: what it reads is read there.
    roots.clear();
    fusionRoots(user, roots);
    for (Operation *root : roots) {
      last = std::max(last, index.lookup(root));
      // A scaling of an AdamW gradient (the clip coefficient) may be
      // folded into the CUDA backend's multi-tensor update, which reads
      // the scale where the update runs: it lives until there (a scalar).
      // (The scale reaches the multiply through its fused broadcast; the
      // gradient, read directly, may still be overwritten in place.)
      if (auto mul = llvm::dyn_cast<MulOp>(root))
        if (user != root && mul.getResult().hasOneUse())
          if (auto update = llvm::dyn_cast<AdamUpdateOp>(
                  *mul.getResult().getUsers().begin()))
            if (update.getGrad() == mul.getResult())
              last = std::max(last, index.lookup(update));
    }
  }
  lastUses[v] = last;
  return last;
}

/// The results the step returns in place of an argument, written into it.
LogicalResult BufferAnalyzer::findInPlaceUpdates() {
  for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
    std::optional<unsigned> reuses = plan::reusedArgument(func, r);
    if (!reuses)
      continue;
    Value updated = ret.getOperand(r);
    unsigned arg = *reuses;
    if (updated == body.getArgument(arg))
      continue; // passed through unchanged
    // A pruned weight (or its state) is the update masked: the update
    // writes into the argument too, and the mask is applied in place.
    SmallVector<Value> chain = Pruning::maskedChain(updated);
    for (size_t i = 1; i < chain.size(); ++i) {
      // The masked value must die at its mask to be overwritten there.
      auto mask = chain[i - 1].getDefiningOp<ApplyMaskOp>();
      if (lastUse(chain[i]) > index.lookup(mask) || updates.count(chain[i])) {
        chain.resize(i);
        break;
      }
    }
    Operation *writer = chain.back().getDefiningOp();
    if (!writer || lastUse(body.getArgument(arg)) > index.lookup(writer))
      return func.emitError()
             << "argument " << arg
             << " is read after the op that updates it in place";
    for (Value v : chain)
      updates[v] = arg;
  }
  return success();
}

int64_t BufferAnalyzer::bufferEnd(int buffer) {
  int64_t last = -1;
  for (Value v : a.buffers[buffer].values)
    last = std::max(last, lastUse(v));
  return last;
}

void BufferAnalyzer::newBuffer(Value v, int64_t step) {
  ArenaBuffer b;
  b.root = v;
  b.values = {v};
  b.interval = {step, step, storageBytes(v.getType())};
  a.buffers.push_back(b);
  a.placement[v] = {Placement::Where::Arena, int(a.buffers.size()) - 1, 0};
}

/// Views share their source's bytes: a reshape of contiguous data, and a
/// transpose, which consumers read with permuted strides. A reshape of a
/// permuted view needs the data contiguous, so it is materialized.
bool BufferAnalyzer::placeView(Operation *op) {
  bool isReshapeView =
      llvm::isa<ReshapeOp>(op) && !a.stridedViews.count(op->getOperand(0));
  bool isStridedView =
      llvm::isa<TransposeOp>(op) && readsStrided(op->getResult(0)) &&
      !a.stridedViews.count(op->getOperand(0)) &&
      a.placement.lookup(op->getOperand(0)).where != Placement::Where::None;
  if (!isReshapeView && !isStridedView)
    return false;
  Placement p = a.placement.lookup(op->getOperand(0));
  a.placement[op->getResult(0)] = p;
  if (p.where == Placement::Where::Arena)
    a.buffers[p.buffer].values.push_back(op->getResult(0));
  if (isStridedView)
    a.stridedViews.insert(op->getResult(0));
  return true;
}

/// In place: `result` takes over an operand's buffer that dies at `step`.
bool BufferAnalyzer::reuseOperandBuffer(Operation *op, Value result,
                                        int64_t step) {
  if (!isElementwiseKernel(op) && !llvm::isa<ApplyMaskOp>(op))
    return false;
  SmallVector<Value> inputs;
  if (auto mask = llvm::dyn_cast<ApplyMaskOp>(op))
    inputs.push_back(mask.getInput()); // masked in place
  else
    sameIndexInputs(op, inputs);
  for (Value operand : inputs) {
    Placement p = a.placement.lookup(operand);
    // A strided view is read in another order than the result is written,
    // so writing in place would overwrite unread elements; so would a
    // wider element type (an f32 cast of f16 values writes element i over
    // f16 elements 2i and 2i+1).
    if (p.where != Placement::Where::Arena || a.stridedViews.count(operand) ||
        bufferEnd(p.buffer) != step ||
        a.buffers[p.buffer].interval.size != storageBytes(result.getType()) ||
        elementBytes(operand.getType()) != elementBytes(result.getType()))
      continue;
    a.buffers[p.buffer].values.push_back(result);
    a.placement[result] = p;
    return true;
  }
  return false;
}

void BufferAnalyzer::place(Operation *op) {
  int64_t step = index[op];
  if (llvm::isa<ConstantOp>(op) || isFused(op)) {
    a.placement[op->getResult(0)] = {Placement::Where::None, -1, 0};
    return;
  }
  if (placeView(op))
    return;
  for (Value result : op->getResults()) {
    auto update = updates.find(result);
    if (update != updates.end())
      a.placement[result] = {Placement::Where::Argument, -1, update->second};
    else if (!reuseOperandBuffer(op, result, step))
      newBuffer(result, step);
  }
}

/// Kinds: gradients feed the optimizer; activations are computed for the
/// loss and kept past it for the backward.
void BufferAnalyzer::classifyBuffers() {
  Value loss;
  for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
    if (model::resultName(func, r) == "loss")
      loss = ret.getOperand(r);
  }
  llvm::SetVector<Operation *> forward;
  if (loss && loss.getDefiningOp()) {
    SmallVector<Operation *> work{loss.getDefiningOp()};
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!forward.insert(op))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          work.push_back(def);
    }
  }
  int64_t lossStep =
      loss && loss.getDefiningOp() ? index.lookup(loss.getDefiningOp()) : end;
  for (ArenaBuffer &b : a.buffers) {
    bool gradient = false;
    for (Value v : b.values)
      for (Operation *user : v.getUsers())
        gradient |=
            llvm::isa<GlobalNormOp>(user) ||
            (llvm::isa<AdamUpdateOp, Adam8bitUpdateOp, SgdUpdateOp>(user) &&
             user->getOperand(1) == v);
    Operation *def = b.root.getDefiningOp();
    // The classifier loss that computes its gradient in its own pass
    // produces those gradients in the forward; they are not kept for the
    // backward.
    bool lossGradient =
        llvm::isa_and_nonnull<LinearCrossEntropyWithGradOp>(def) &&
        b.root != def->getResult(0);
    if (gradient)
      b.kind = BufferKind::Gradient;
    else if (def && forward.contains(def) && b.interval.end > lossStep &&
             !lossGradient)
      b.kind = BufferKind::Activation;
  }
}

} // namespace

FailureOr<BufferAnalysis> BufferAnalysis::analyze(func::FuncOp func) {
  return BufferAnalyzer(func).run();
}
