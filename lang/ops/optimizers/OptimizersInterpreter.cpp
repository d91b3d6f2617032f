//===- OptimizersInterpreter.cpp - The optimizer in the interpreter -------===//
//
// The interpreter's models of the optimizer's ops, written from
// torch.optim's and bitsandbytes' definitions in double, independently of
// OptimizersFormulas.h: Adam and SGD round each intermediate to the
// parameter's type as PyTorch's f32 tensor ops would (not in exact mode),
// and adamw8bit dequantizes, steps in f32 and searches every code for the
// nearest (lang/ops/quantization/QuantizationReference.h), where the
// trainer searches a bucketed table.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/quantization/QuantizationReference.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// A rank-0 result.
void setScalar(OpContext &context, Value v, double x) {
  Tensor out = context.like(v);
  out.data[0] = x;
  context.set(v, std::move(out));
}

/// An f16 step whose gradients overflowed (`skip` nonzero): each result
/// is operand `sources[i]`, unchanged. False when the step is taken.
bool skipped(Operation *op, Value skip, std::initializer_list<unsigned> sources,
             OpContext &context) {
  if (!skip || context.get(skip).data[0] == 0)
    return false;
  // Copies first: set() may move the tensors the operands' references see.
  std::vector<Tensor> same;
  for (unsigned source : sources)
    same.push_back(context.get(op->getOperand(source)));
  for (unsigned r = 0; r < same.size(); ++r)
    context.set(op->getResult(r), std::move(same[r]));
  return true;
}

LogicalResult interpretGlobalNorm(GlobalNormOp op, OpContext &context) {
  double sum = 0;
  for (Value v : op.getInputs())
    for (double x : context.get(v).data)
      sum += x * x;
  setScalar(context, op.getResult(), std::sqrt(sum));
  return success();
}

LogicalResult interpretClipCoefficient(ClipCoefficientOp op,
                                       OpContext &context) {
  double norm = context.get(op.getNorm()).data[0];
  // As torch.nn.utils.clip_grad_norm_: the coefficient in the gradients'
  // precision (f32; double in exact mode), clamped.
  double maxNorm = op.getMaxNorm().convertToDouble();
  double coef = context.options().exact
                    ? maxNorm / (norm + 1e-6)
                    : double(float(maxNorm) / float(norm + 1e-6));
  setScalar(context, op.getResult(), std::min(coef, 1.0));
  return success();
}

LogicalResult interpretLossScaleUpdate(LossScaleUpdateOp op,
                                       OpContext &context) {
  // torch.cuda.amp.GradScaler.update, with the count as a float.
  double norm = context.get(op.getNorm()).data[0];
  double scale = context.get(op.getScale()).data[0];
  double count = context.get(op.getCount()).data[0];
  bool finite = std::isfinite(norm);
  double newCount = finite ? count + 1 : 0;
  double newScale =
      finite ? scale : scale * op.getBackoffFactor().convertToDouble();
  if (finite && newCount >= double(op.getGrowthInterval())) {
    newScale = scale * op.getGrowthFactor().convertToDouble();
    newCount = 0;
  }
  setScalar(context, op.getNewScale(), newScale);
  setScalar(context, op.getNewCount(), newCount);
  setScalar(context, op.getSkip(), finite ? 0.0 : 1.0);
  return success();
}

LogicalResult interpretLrSchedule(LrScheduleOp op, OpContext &context) {
  double step = context.get(op.getStep()).data[0];
  double total = op.getSteps() > 0 ? double(op.getSteps())
                                   : context.get(op.getTotalSteps()).data[0];
  double base = op.getBaseLr().convertToDouble(),
         minLr = op.getMinLr().convertToDouble();
  double warmup = double(op.getWarmup());
  double lr = base;
  if (warmup > 0 && step <= warmup) {
    lr = base * step / warmup;
  } else if (op.getKind() == "cosine") {
    double progress = (step - warmup) / std::max(1.0, total - warmup);
    progress = std::min(1.0, std::max(0.0, progress));
    lr = minLr + (base - minLr) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  setScalar(context, op.getResult(), lr);
  return success();
}

LogicalResult interpretSgd(SgdUpdateOp op, OpContext &context) {
  const Tensor &p = context.get(op.getParam()), &g = context.get(op.getGrad()),
               &buf = context.get(op.getMomentumBuffer());
  if (skipped(op, op.getSkip(), {0, 2}, context))
    return success();
  double lr = context.get(op.getLr()).data[0];
  int64_t step = int64_t(context.get(op.getStep()).data[0]);
  double momentum = op.getMomentum().convertToDouble();
  double dampening = op.getDampening().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  Tensor newP = context.like(op.getNewParam()), newBuf = buf;
  ElementType t = p.type;
  auto r = [&](double x) {
    return context.options().exact ? x : roundTo(t, x);
  };
  for (int64_t i = 0; i < p.numElements(); ++i) {
    double d = wd != 0 ? r(g.data[i] + wd * p.data[i]) : g.data[i];
    if (momentum != 0) {
      double b =
          step <= 1 ? d : r(momentum * buf.data[i] + (1 - dampening) * d);
      newBuf.data[i] = b;
      d = op.getNesterov() ? r(d + momentum * b) : b;
    }
    newP.data[i] = p.data[i] - lr * d;
  }
  context.set(op.getNewParam(), std::move(newP));
  return context.finish(op.getNewMomentumBuffer(), std::move(newBuf));
}

LogicalResult interpretAdam(AdamUpdateOp op, OpContext &context) {
  const Tensor &p = context.get(op.getParam()), &g = context.get(op.getGrad());
  const Tensor &m = context.get(op.getExpAvg()),
               &v = context.get(op.getExpAvgSq());
  if (skipped(op, op.getSkip(), {0, 2, 3}, context))
    return success();
  // PyTorch's single-tensor Adam, step by step, each intermediate rounded to
  // the parameter's type as its f32 arithmetic would.
  double lr = context.get(op.getLr()).data[0];
  double step = context.get(op.getStep()).data[0];
  double b1 = op.getBeta1().convertToDouble(),
         b2 = op.getBeta2().convertToDouble();
  double eps = op.getEps().convertToDouble(),
         wd = op.getWeightDecay().convertToDouble();
  ElementType t = p.type;
  auto r = [&](double x) {
    return context.options().exact ? x : roundTo(t, x);
  };
  double biasCorrection1 = 1 - std::pow(b1, step);
  double biasCorrection2 = 1 - std::pow(b2, step);
  double stepSize = lr / biasCorrection1;
  double biasCorrection2Sqrt = std::sqrt(biasCorrection2);
  Tensor newP = context.like(op.getNewParam()),
         newM = context.like(op.getNewExpAvg()),
         newV = context.like(op.getNewExpAvgSq());
  for (int64_t i = 0; i < p.numElements(); ++i) {
    double param = p.data[i], grad = g.data[i];
    if (op.getDecoupled())
      param = r(param * (1 - lr * wd));
    else if (wd != 0)
      grad = r(grad + wd * param);
    double mi = r(m.data[i] + (grad - m.data[i]) * (1 - b1));
    double vi = r(r(v.data[i] * b2) + (1 - b2) * grad * grad);
    double denom = r(r(std::sqrt(vi) / biasCorrection2Sqrt) + eps);
    newP.data[i] = param - stepSize * r(mi / denom);
    newM.data[i] = mi;
    newV.data[i] = vi;
  }
  context.set(op.getNewParam(), std::move(newP));
  context.set(op.getNewExpAvg(), std::move(newM));
  return context.finish(op.getNewExpAvgSq(), std::move(newV));
}

LogicalResult interpretAdam8bit(Adam8bitUpdateOp op, OpContext &context) {
  const Tensor &p = context.get(op.getParam()), &g = context.get(op.getGrad());
  const Tensor &mCodes = context.get(op.getExpAvgCodes()),
               &mMax = context.get(op.getExpAvgAbsmax()),
               &vCodes = context.get(op.getExpAvgSqCodes()),
               &vMax = context.get(op.getExpAvgSqAbsmax());
  if (skipped(op, op.getSkip(), {0, 2, 3, 4, 5}, context))
    return success();
  // bitsandbytes' arithmetic, in f32: dequantize both moments, take
  // torch.optim.AdamW's step (its scalars computed in double and rounded
  // once, as Python floats meet f32 tensors), requantize each block by its
  // new maximum.
  int64_t n = p.numElements(), block = op.getBlockSize();
  double lr = float(context.get(op.getLr()).data[0]);
  double step = context.get(op.getStep()).data[0];
  double b1 = op.getBeta1().convertToDouble(),
         b2 = op.getBeta2().convertToDouble();
  double eps = op.getEps().convertToDouble(),
         wd = op.getWeightDecay().convertToDouble();
  float stepSize = float(lr / (1.0 - std::pow(b1, step)));
  float biasCorrection2Sqrt = float(std::sqrt(1.0 - std::pow(b2, step)));
  float decay = float(1.0 - lr * wd), beta2 = float(b2);
  float oneMinusBeta1 = float(1.0 - b1), oneMinusBeta2 = float(1.0 - b2);
  float epsilon = float(eps);
  Tensor outP = context.like(op.getNewParam()),
         outMc = context.like(op.getNewExpAvgCodes()),
         outMa = context.like(op.getNewExpAvgAbsmax()),
         outVc = context.like(op.getNewExpAvgSqCodes()),
         outVa = context.like(op.getNewExpAvgSqAbsmax());
  auto codeAt = [](const Tensor &codes, int64_t i) {
    return uint8_t(int8_t(codes.data[i]));
  };
  std::vector<float> newM, newV;
  for (int64_t begin = 0, b = 0; begin < n; begin += block, ++b) {
    int64_t end = std::min(n, begin + block);
    float mMaxIn = float(mMax.data[b]), vMaxIn = float(vMax.data[b]);
    newM.clear();
    newV.clear();
    for (int64_t i = begin; i < end; ++i) {
      float grad = float(g.data[i]);
      float m = reference::codeValue(codeAt(mCodes, i), true) * mMaxIn;
      float v = reference::codeValue(codeAt(vCodes, i), false) * vMaxIn;
      float param = float(p.data[i]) * decay;
      m = m + (grad - m) * oneMinusBeta1;
      v = v * beta2 + oneMinusBeta2 * grad * grad;
      float denom = std::sqrt(v) / biasCorrection2Sqrt + epsilon;
      param = param - stepSize * (m / denom);
      outP.data[i] = context.options().exact ? param : roundTo(p.type, param);
      newM.push_back(m);
      newV.push_back(v);
    }
    auto requantize = [&](const std::vector<float> &values, bool isSigned,
                          Tensor &codes, Tensor &absMax) {
      float largest = 0.0f;
      for (float x : values)
        largest = std::max(largest, std::fabs(x));
      float inverse = largest > 0.0f ? 1.0f / largest : 0.0f;
      for (size_t j = 0; j < values.size(); ++j)
        codes.data[begin + j] =
            int8_t(reference::nearestCode(values[j] * inverse, isSigned));
      absMax.data[b] = largest;
    };
    requantize(newM, true, outMc, outMa);
    requantize(newV, false, outVc, outVa);
  }
  context.set(op.getNewParam(), std::move(outP));
  context.set(op.getNewExpAvgCodes(), std::move(outMc));
  context.set(op.getNewExpAvgAbsmax(), std::move(outMa));
  context.set(op.getNewExpAvgSqCodes(), std::move(outVc));
  return context.finish(op.getNewExpAvgSqAbsmax(), std::move(outVa));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerOptimizersInterpreterModels(MLIRContext &context) {
  InterpreterFunction<LrScheduleOp, interpretLrSchedule>::attach(context);
  InterpreterFunction<GlobalNormOp, interpretGlobalNorm>::attach(context);
  InterpreterFunction<ClipCoefficientOp, interpretClipCoefficient>::attach(
      context);
  InterpreterFunction<LossScaleUpdateOp, interpretLossScaleUpdate>::attach(
      context);
  InterpreterFunction<SgdUpdateOp, interpretSgd>::attach(context);
  InterpreterFunction<AdamUpdateOp, interpretAdam>::attach(context);
  InterpreterFunction<Adam8bitUpdateOp, interpretAdam8bit>::attach(context);
}
