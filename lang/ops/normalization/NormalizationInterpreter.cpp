//===- NormalizationInterpreter.cpp - Normalization in the interpreter ----===//
//
// The interpreter's model of layernorm, rmsnorm, batch_norm (and
// batch_norm_apply) and their backward ops: in double, each row's (channel's)
// statistics by the textbook definitions, the per-element arithmetic
// NormalizationFormulas.h's.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/normalization/NormalizationFormulas.h"

#include <cmath>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;
using namespace mnemo::normalization;

namespace {

/// Layer or RMS normalization over the last dimension, or their gradients
/// (operands of the gradient ops: grad, input, scale; results: the input's,
/// the scale's and, for layernorm, the bias's gradients).
LogicalResult interpretNormalization(Operation *op, OpContext &context,
                                     double eps, bool rms, bool grad) {
  const Tensor &x = context.get(op->getOperand(grad ? 1 : 0));
  const Tensor &scale = context.get(op->getOperand(grad ? 2 : 1));
  int64_t d = x.shape.back(), rows = x.numElements() / d;
  Tensor y = context.like(op->getResult(0));
  Tensor dscale(scale.type, scale.shape), dbias(scale.type, scale.shape);
  const Tensor *bias =
      !grad && !rms ? &context.get(op->getOperand(2)) : nullptr;
  const Tensor *g = grad ? &context.get(op->getOperand(0)) : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = &x.data[r * d];
    double mean = 0;
    if (!rms) {
      for (int64_t j = 0; j < d; ++j)
        mean += row[j];
      mean /= double(d);
    }
    double var = 0;
    for (int64_t j = 0; j < d; ++j)
      var += (row[j] - mean) * (row[j] - mean);
    var /= double(d);
    double rstd = 1.0 / std::sqrt(var + eps);
    if (!grad) {
      for (int64_t j = 0; j < d; ++j)
        y.data[r * d + j] = normalize(row[j], mean, rstd, scale.data[j],
                                      bias ? bias->data[j] : 0.0);
      continue;
    }
    const double *grow = &g->data[r * d];
    double meanDxhat = 0, meanDxhatXhat = 0;
    for (int64_t j = 0; j < d; ++j) {
      double dxhat = grow[j] * scale.data[j];
      double xhat = normalized(row[j], mean, rstd);
      meanDxhat += dxhat;
      meanDxhatXhat += dxhat * xhat;
      dscale.data[j] += grow[j] * xhat;
      dbias.data[j] += grow[j];
    }
    meanDxhat /= double(d);
    meanDxhatXhat /= double(d);
    for (int64_t j = 0; j < d; ++j)
      y.data[r * d + j] =
          normalizeInputGrad(grow[j], row[j], scale.data[j], mean, rstd,
                             rms ? 0.0 : meanDxhat, meanDxhatXhat);
  }
  context.set(op->getResult(0), std::move(y));
  if (grad) {
    context.set(op->getResult(1), std::move(dscale));
    if (!rms)
      context.set(op->getResult(2), std::move(dbias));
  }
  return success();
}

/// Batch normalization of [N, C, S...] per channel, or its gradients
/// (operands grad, input, scale, mean, variance; results the input's, the
/// scale's and the bias's gradients). The forward's statistics are
/// computed here in double; batch_norm_apply (one result) and the backward
/// read the forward's.
LogicalResult interpretBatchNorm(Operation *op, OpContext &context, double eps,
                                 bool grad) {
  const Tensor &x = context.get(op->getOperand(grad ? 1 : 0));
  const Tensor &scale = context.get(op->getOperand(grad ? 2 : 1));
  int64_t n = x.shape[0], c = x.shape[1];
  int64_t inner = x.numElements() / (n * c), count = n * inner;
  auto at = [&](int64_t i, int64_t ch, int64_t s) {
    return (i * c + ch) * inner + s;
  };
  Tensor y = context.like(op->getResult(0));
  if (!grad) {
    const Tensor &bias = context.get(op->getOperand(2));
    bool apply = op->getNumResults() == 1;
    Tensor mean =
        apply ? context.get(op->getOperand(3)) : context.like(op->getResult(1));
    Tensor var =
        apply ? context.get(op->getOperand(4)) : context.like(op->getResult(2));
    // The mean of f(x) over a channel's elements.
    auto channelMean = [&](int64_t ch, auto f) {
      double sum = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t s = 0; s < inner; ++s)
          sum += f(x.data[at(i, ch, s)]);
      return sum / double(count);
    };
    for (int64_t ch = 0; ch < c; ++ch) {
      double m =
          apply ? mean.data[ch] : channelMean(ch, [](double e) { return e; });
      double v =
          apply ? var.data[ch]
                : channelMean(ch, [&](double e) { return (e - m) * (e - m); });
      double rstd = 1.0 / std::sqrt(v + eps);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t s = 0; s < inner; ++s)
          y.data[at(i, ch, s)] = normalize(x.data[at(i, ch, s)], m, rstd,
                                           scale.data[ch], bias.data[ch]);
      mean.data[ch] = m;
      var.data[ch] = v;
    }
    context.set(op->getResult(0), std::move(y));
    if (!apply) {
      context.set(op->getResult(1), std::move(mean));
      context.set(op->getResult(2), std::move(var));
    }
    return success();
  }
  const Tensor &g = context.get(op->getOperand(0));
  const Tensor &mean = context.get(op->getOperand(3));
  const Tensor &var = context.get(op->getOperand(4));
  Tensor dscale(scale.type, scale.shape), dbias(scale.type, scale.shape);
  for (int64_t ch = 0; ch < c; ++ch) {
    double m = mean.data[ch], rstd = 1.0 / std::sqrt(var.data[ch] + eps);
    double sumDy = 0, sumDyXhat = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t s = 0; s < inner; ++s) {
        int64_t k = at(i, ch, s);
        sumDy += g.data[k];
        sumDyXhat += g.data[k] * normalized(x.data[k], m, rstd);
      }
    dscale.data[ch] = sumDyXhat;
    dbias.data[ch] = sumDy;
    double meanDxhat = sumDy * scale.data[ch] / double(count);
    double meanDxhatXhat = sumDyXhat * scale.data[ch] / double(count);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t s = 0; s < inner; ++s) {
        int64_t k = at(i, ch, s);
        y.data[k] = normalizeInputGrad(g.data[k], x.data[k], scale.data[ch], m,
                                       rstd, meanDxhat, meanDxhatXhat);
      }
  }
  context.set(op->getResult(0), std::move(y));
  context.set(op->getResult(1), std::move(dscale));
  return context.finish(op->getResult(2), std::move(dbias));
}

/// The model of batch_norm and batch_norm_apply (`Grad`: batch_norm_grad).
template <typename Op, bool Grad>
struct BatchNormInterpreterModel
    : InterpretedOpInterface::ExternalModel<BatchNormInterpreterModel<Op, Grad>,
                                            Op> {
  LogicalResult interpret(Operation *op, OpContext &context) const {
    double eps = llvm::cast<Op>(op).getEpsilon().convertToDouble();
    return interpretBatchNorm(op, context, eps, Grad);
  }
};

/// The model of `Op`, an RMS norm when `Rms`, a backward op when `Grad`.
template <typename Op, bool Rms, bool Grad>
struct NormalizationInterpreterModel
    : InterpretedOpInterface::ExternalModel<
          NormalizationInterpreterModel<Op, Rms, Grad>, Op> {
  LogicalResult interpret(Operation *op, OpContext &context) const {
    double eps = llvm::cast<Op>(op).getEpsilon().convertToDouble();
    return interpretNormalization(op, context, eps, Rms, Grad);
  }
};

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerNormalizationInterpreterModels(MLIRContext &context) {
  LayerNormOp::attachInterface<
      NormalizationInterpreterModel<LayerNormOp, false, false>>(context);
  RmsNormOp::attachInterface<
      NormalizationInterpreterModel<RmsNormOp, true, false>>(context);
  LayerNormGradOp::attachInterface<
      NormalizationInterpreterModel<LayerNormGradOp, false, true>>(context);
  RmsNormGradOp::attachInterface<
      NormalizationInterpreterModel<RmsNormGradOp, true, true>>(context);
  BatchNormOp::attachInterface<BatchNormInterpreterModel<BatchNormOp, false>>(
      context);
  BatchNormApplyOp::attachInterface<
      BatchNormInterpreterModel<BatchNormApplyOp, false>>(context);
  BatchNormGradOp::attachInterface<
      BatchNormInterpreterModel<BatchNormGradOp, true>>(context);
}
