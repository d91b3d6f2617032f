//===- LossesInterpreter.cpp - Losses in the reference interpreter --------===//
//
// The interpreter's model of cross_entropy, its gradient and accuracy: in
// double, each row's log-sum-exp with the C library, the terms by
// LossesFormulas.h. A target outside the classes is an error, as in
// PyTorch; accuracy's ties go to the first index, as argmax.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/losses/LossesFormulas.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// The mean loss (grad false: operands logits, targets) or its gradient
/// (grad true: operands the loss's gradient, logits, targets).
LogicalResult interpretCrossEntropy(Operation *op, OpContext &context,
                                    bool grad) {
  const Tensor &logits = context.get(op->getOperand(grad ? 1 : 0));
  const Tensor &targets = context.get(op->getOperand(grad ? 2 : 1));
  int64_t classes = logits.shape.back(), rows = targets.numElements();
  Tensor out = context.like(op->getResult(0));
  double scale =
      grad ? context.get(op->getOperand(0)).data[0] / double(rows) : 0.0;
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t t = int64_t(targets.data[r]);
    if (t < 0 || t >= classes)
      return context.fail(op, "target " + std::to_string(t) +
                                  " is out of range for " +
                                  std::to_string(classes) + " classes");
    const double *row = &logits.data[r * classes];
    double maxv = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(row[c] - maxv);
    double logSum = std::log(sum) + maxv;
    if (!grad) {
      total += losses::crossEntropyTerm(logSum, row[t]);
      continue;
    }
    for (int64_t c = 0; c < classes; ++c)
      out.data[r * classes + c] =
          losses::crossEntropyGradValue<double, ExactMath>(row[c], logSum,
                                                           c == t, scale);
  }
  if (!grad)
    out.data[0] = total / double(rows);
  context.set(op->getResult(0), std::move(out));
  return success();
}

template <typename Op, bool Grad>
struct CrossEntropyInterpreterModel
    : InterpretedOpInterface::ExternalModel<
          CrossEntropyInterpreterModel<Op, Grad>, Op> {
  LogicalResult interpret(Operation *op, OpContext &context) const {
    return interpretCrossEntropy(op, context, Grad);
  }
};

LogicalResult interpretAccuracy(AccuracyOp op, OpContext &context) {
  const Tensor &logits = context.get(op.getLogits()),
               &targets = context.get(op.getTargets());
  int64_t classes = logits.shape.back(), rows = targets.numElements();
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = &logits.data[r * classes];
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best])
        best = c;
    correct += best == int64_t(targets.data[r]);
  }
  Tensor out = context.like(op.getResult());
  out.data[0] = double(correct) / double(rows);
  context.set(op.getResult(), std::move(out));
  return success();
}

/// mean((a - b)^2) in double.
LogicalResult interpretMse(MseOp op, OpContext &context) {
  const Tensor &a = context.get(op.getLhs()), &b = context.get(op.getRhs());
  double sum = 0;
  for (int64_t i = 0; i < a.numElements(); ++i)
    sum += (a.data[i] - b.data[i]) * (a.data[i] - b.data[i]);
  Tensor out = context.like(op.getResult());
  out.data[0] = sum / double(a.numElements());
  context.set(op.getResult(), std::move(out));
  return success();
}

} // namespace

namespace mnemo {
namespace interp {
/// Called by registerFamilyInterpreterModels (generated).
void registerLossesInterpreterModels(MLIRContext &context) {
  CrossEntropyOp::attachInterface<
      CrossEntropyInterpreterModel<CrossEntropyOp, false>>(context);
  CrossEntropyGradOp::attachInterface<
      CrossEntropyInterpreterModel<CrossEntropyGradOp, true>>(context);
  InterpreterFunction<AccuracyOp, interpretAccuracy>::attach(context);
  InterpreterFunction<MseOp, interpretMse>::attach(context);
}
} // namespace interp
} // namespace mnemo
