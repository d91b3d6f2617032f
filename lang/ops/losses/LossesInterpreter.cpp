//===- LossesInterpreter.cpp - Losses in the reference interpreter --------===//
//
// The interpreter's model of cross_entropy, its gradient, the fused
// linear_cross_entropy (unfused: the whole product, then the loss and, in
// the evaluation step, the accuracy) and accuracy: in double, each row's
// log-sum-exp with the C library, the terms by LossesFormulas.h. A target
// outside the classes that is not ignore_index is an error, as in PyTorch;
// accuracy's ties go to the first index, as argmax.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/losses/LossesFormulas.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// Each row's log-sum-exp in double with the C library.
double rowLogSumExp(const double *row, int64_t classes) {
  double maxv = *std::max_element(row, row + classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c)
    sum += std::exp(row[c] - maxv);
  return std::log(sum) + maxv;
}

/// The loss's options, and the check every target passes: a class or
/// ignore_index.
struct LossOptions {
  int64_t ignoreIndex;
  double smoothing;
  bool counts(double target) const {
    return losses::countsTowardLoss(int64_t(target), ignoreIndex);
  }
};

LogicalResult checkTargets(Operation *op, OpContext &context,
                           const Tensor &targets, int64_t classes,
                           const LossOptions &o, int64_t &counted) {
  counted = 0;
  for (double t : targets.data) {
    if (!o.counts(t))
      continue;
    if (t < 0 || t >= double(classes))
      return context.fail(op, "target " + std::to_string(int64_t(t)) +
                                  " is out of range for " +
                                  std::to_string(classes) +
                                  " classes (and is not ignore_index, " +
                                  std::to_string(o.ignoreIndex) + ")");
    ++counted;
  }
  return success();
}

/// The mean loss over the counted rows of `logits` [rows, classes].
double meanLoss(const double *logits, const Tensor &targets, int64_t classes,
                const LossOptions &o, int64_t counted) {
  double total = 0;
  for (int64_t r = 0; r < targets.numElements(); ++r) {
    if (!o.counts(targets.data[r]))
      continue;
    const double *row = logits + r * classes;
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += row[c];
    total += losses::crossEntropyTerm(rowLogSumExp(row, classes),
                                      row[int64_t(targets.data[r])], sum,
                                      double(classes), o.smoothing);
  }
  return total / double(counted);
}

/// The logits' gradient, `scale` the loss's gradient over the counted rows.
void logitsGradient(const double *logits, const Tensor &targets,
                    int64_t classes, const LossOptions &o, double scale,
                    double *out) {
  for (int64_t r = 0; r < targets.numElements(); ++r) {
    const double *row = logits + r * classes;
    double *dr = out + r * classes;
    int64_t t = int64_t(targets.data[r]);
    if (!o.counts(targets.data[r])) {
      std::fill(dr, dr + classes, 0.0);
      continue;
    }
    double logSum = rowLogSumExp(row, classes);
    for (int64_t c = 0; c < classes; ++c)
      dr[c] = losses::crossEntropyGradValue<double, ExactMath>(
          row[c], logSum, c == t, scale, double(classes), o.smoothing);
  }
}

/// The fraction of counted rows of `logits` [rows, classes] whose first
/// maximum is the target (ties to the first index, as argmax).
double firstMaxAccuracy(const double *logits, const Tensor &targets,
                        int64_t classes, int64_t ignoreIndex) {
  int64_t correct = 0, counted = 0;
  for (int64_t r = 0; r < targets.numElements(); ++r) {
    if (!losses::countsTowardLoss(int64_t(targets.data[r]), ignoreIndex))
      continue;
    const double *row = logits + r * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best])
        best = c;
    correct += best == int64_t(targets.data[r]);
    ++counted;
  }
  return double(correct) / double(counted);
}

template <typename Op> LossOptions optionsOf(Op op) {
  return {int64_t(op.getIgnoreIndex()),
          op.getLabelSmoothing().convertToDouble()};
}

LogicalResult interpretCrossEntropy(CrossEntropyOp op, OpContext &context) {
  const Tensor &logits = context.get(op.getLogits()),
               &targets = context.get(op.getTargets());
  int64_t classes = logits.shape.back(), counted;
  LossOptions o = optionsOf(op);
  if (failed(checkTargets(op, context, targets, classes, o, counted)))
    return failure();
  Tensor out = context.like(op.getResult());
  out.data[0] = meanLoss(logits.data.data(), targets, classes, o, counted);
  return context.finish(op.getResult(), std::move(out));
}

LogicalResult interpretCrossEntropyGrad(CrossEntropyGradOp op,
                                        OpContext &context) {
  const Tensor &logits = context.get(op.getLogits()),
               &targets = context.get(op.getTargets());
  int64_t classes = logits.shape.back(), counted;
  LossOptions o = optionsOf(op);
  if (failed(checkTargets(op, context, targets, classes, o, counted)))
    return failure();
  Tensor out = context.like(op.getResult());
  logitsGradient(logits.data.data(), targets, classes, o,
                 context.get(op.getGrad()).data[0] / double(counted),
                 out.data.data());
  return context.finish(op.getResult(), std::move(out));
}

/// The fused classifier loss, unfused: the whole [rows, classes] product
/// (plus the bias, if any) in double (the reference the chunked kernels are
/// checked against).
std::vector<double> classifierLogits(const Tensor &hidden, const Tensor &weight,
                                     const Tensor *bias, bool transposeWeight,
                                     int64_t classes) {
  int64_t dim = hidden.shape.back(), rows = hidden.numElements() / dim;
  std::vector<double> logits(rows * classes, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < classes; ++c) {
      double sum = bias ? bias->data[c] : 0.0;
      for (int64_t d = 0; d < dim; ++d)
        sum += hidden.data[r * dim + d] *
               weight.data[transposeWeight ? c * dim + d : d * classes + c];
      logits[r * classes + c] = sum;
    }
  return logits;
}

int64_t classesOf(const Tensor &weight, bool transposeWeight) {
  return weight.shape[transposeWeight ? 0 : 1];
}

const Tensor *optionalTensor(Value v, OpContext &context) {
  return v ? &context.get(v) : nullptr;
}

LogicalResult interpretLinearCrossEntropy(LinearCrossEntropyOp op,
                                          OpContext &context) {
  const Tensor &hidden = context.get(op.getHidden()),
               &weight = context.get(op.getWeight()),
               &targets = context.get(op.getTargets());
  int64_t classes = classesOf(weight, op.getTransposeWeight()), counted;
  LossOptions o = optionsOf(op);
  if (failed(checkTargets(op, context, targets, classes, o, counted)))
    return failure();
  std::vector<double> logits =
      classifierLogits(hidden, weight, optionalTensor(op.getBias(), context),
                       op.getTransposeWeight(), classes);
  Tensor loss = context.like(op.getResult()),
         logSumExp = context.like(op.getLogSumExp());
  loss.data[0] = meanLoss(logits.data(), targets, classes, o, counted);
  for (int64_t r = 0; r < targets.numElements(); ++r)
    logSumExp.data[r] = rowLogSumExp(&logits[r * classes], classes);
  context.set(op.getResult(), std::move(loss));
  context.set(op.getLogSumExp(), std::move(logSumExp));
  if (op.getAccuracy()) {
    Tensor accuracy = context.like(op.getAccuracy());
    accuracy.data[0] =
        firstMaxAccuracy(logits.data(), targets, classes, o.ignoreIndex);
    context.set(op.getAccuracy(), std::move(accuracy));
  }
  return success();
}

/// The gradient from the logits recomputed whole, and their log-sum-exp
/// recomputed too (the saved one is not read: the kernels' use of it is
/// what this checks); linear_cross_entropy_with_grad's loss as well, from
/// the same logits.
template <typename Op>
LogicalResult interpretClassifierGradients(Op op, OpContext &context) {
  const Tensor &hidden = context.get(op.getHidden()),
               &weight = context.get(op.getWeight()),
               &targets = context.get(op.getTargets());
  bool transposeWeight = op.getTransposeWeight();
  int64_t classes = classesOf(weight, transposeWeight), counted;
  int64_t dim = hidden.shape.back(), rows = targets.numElements();
  LossOptions o = optionsOf(op);
  if (failed(checkTargets(op, context, targets, classes, o, counted)))
    return failure();
  std::vector<double> logits =
      classifierLogits(hidden, weight, optionalTensor(op.getBias(), context),
                       transposeWeight, classes);
  if constexpr (std::is_same_v<Op, LinearCrossEntropyWithGradOp>) {
    Tensor loss = context.like(op.getResult());
    loss.data[0] = meanLoss(logits.data(), targets, classes, o, counted);
    context.set(op.getResult(), std::move(loss));
  }
  std::vector<double> dLogits(logits.size());
  logitsGradient(logits.data(), targets, classes, o,
                 context.get(op.getGrad()).data[0] / double(counted),
                 dLogits.data());
  Tensor dHidden = context.like(op.getHiddenGrad()),
         dWeight = context.like(op.getWeightGrad());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < classes; ++c) {
      double g = dLogits[r * classes + c];
      if (g == 0)
        continue;
      for (int64_t d = 0; d < dim; ++d) {
        int64_t w = transposeWeight ? c * dim + d : d * classes + c;
        dHidden.data[r * dim + d] += g * weight.data[w];
        dWeight.data[w] += g * hidden.data[r * dim + d];
      }
    }
  context.set(op.getHiddenGrad(), std::move(dHidden));
  context.set(op.getWeightGrad(), std::move(dWeight));
  if (op.getBiasGrad()) {
    Tensor dBias = context.like(op.getBiasGrad());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < classes; ++c)
        dBias.data[c] += dLogits[r * classes + c];
    context.set(op.getBiasGrad(), std::move(dBias));
  }
  return success();
}

LogicalResult interpretAccuracy(AccuracyOp op, OpContext &context) {
  const Tensor &logits = context.get(op.getLogits());
  Tensor out = context.like(op.getResult());
  out.data[0] =
      firstMaxAccuracy(logits.data.data(), context.get(op.getTargets()),
                       logits.shape.back(), int64_t(op.getIgnoreIndex()));
  return context.finish(op.getResult(), std::move(out));
}

/// mean((a - b)^2) in double.
LogicalResult interpretMse(MseOp op, OpContext &context) {
  const Tensor &a = context.get(op.getLhs()), &b = context.get(op.getRhs());
  double sum = 0;
  for (int64_t i = 0; i < a.numElements(); ++i)
    sum += (a.data[i] - b.data[i]) * (a.data[i] - b.data[i]);
  Tensor out = context.like(op.getResult());
  out.data[0] = sum / double(a.numElements());
  return context.finish(op.getResult(), std::move(out));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerLossesInterpreterModels(MLIRContext &context) {
  InterpreterFunction<CrossEntropyOp, interpretCrossEntropy>::attach(context);
  InterpreterFunction<CrossEntropyGradOp, interpretCrossEntropyGrad>::attach(
      context);
  InterpreterFunction<LinearCrossEntropyOp,
                      interpretLinearCrossEntropy>::attach(context);
  InterpreterFunction<
      LinearCrossEntropyGradOp,
      interpretClassifierGradients<LinearCrossEntropyGradOp>>::attach(context);
  InterpreterFunction<LinearCrossEntropyWithGradOp,
                      interpretClassifierGradients<
                          LinearCrossEntropyWithGradOp>>::attach(context);
  InterpreterFunction<AccuracyOp, interpretAccuracy>::attach(context);
  InterpreterFunction<MseOp, interpretMse>::attach(context);
}
