//===- AttentionInterpreter.cpp - Attention in the reference interpreter --===//
//
// The interpreter's model of fused attention is the unfused definition, in
// double over whole rows: every score, the row's softmax by its maximum and
// sum, the dropout mask, the weighted sum of values. Its gradient is the
// textbook softmax backward from the probabilities it recomputes (rowsum
// of P * dP, not the kernels' rowsum of dO * O), so the kernels' tiling,
// online softmax and identities are checked against something that shares
// none of them. Only the formulas of AttentionFormulas.h (which keys are
// visible, the dropout mask) are common.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/attention/AttentionFormulas.h"

#include <cmath>
#include <limits>
#include <vector>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;
using attention::AttentionGeometry;

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

/// The probabilities of one (batch, head) before dropout, [Tq][Tk], from
/// the definition: masked scaled scores, then each row's softmax (a row
/// with no visible key is all zeros); and, when `logSumExp` is given, each
/// row's log-sum-exp of its scores there (-inf for a row with none).
std::vector<double> probabilities(const AttentionGeometry &g, const Tensor &q,
                                  const Tensor &k, const Tensor *mask,
                                  int64_t b, int64_t h,
                                  double *logSumExp = nullptr) {
  int64_t D = g.headDim, bh = b * g.heads + h;
  int64_t kvh = b * g.kvHeads + attention::kvHeadOf(g, h);
  std::vector<double> p(g.queries * g.keys);
  for (int64_t i = 0; i < g.queries; ++i) {
    double *row = &p[i * g.keys];
    double rowMax = kMinusInfinity;
    for (int64_t j = 0; j < g.keys; ++j) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d)
        s += q.data[(bh * g.queries + i) * D + d] *
             k.data[(kvh * g.keys + j) * D + d];
      s *= g.scale;
      if (attention::causallyHidden(g, i, j))
        s = kMinusInfinity;
      else if (mask) {
        double m = mask->data[attention::maskOffset(g, b, h, i, j)];
        s = g.maskKind == attention::kBooleanMask
                ? (m != 0 ? s : kMinusInfinity)
                : s + m;
      }
      row[j] = s;
      rowMax = std::max(rowMax, s);
    }
    double sum = 0;
    for (int64_t j = 0; j < g.keys; ++j) {
      row[j] = rowMax == kMinusInfinity ? 0 : std::exp(row[j] - rowMax);
      sum += row[j];
    }
    for (int64_t j = 0; j < g.keys; ++j)
      row[j] = sum > 0 ? row[j] / sum : 0;
    if (logSumExp)
      logSumExp[i] = sum > 0 ? rowMax + std::log(sum) : kMinusInfinity;
  }
  return p;
}

/// The dropout factor of probability (b, h, i, j), in double.
double dropoutFactor(const AttentionGeometry &g, int64_t step, int64_t b,
                     int64_t h, int64_t i, int64_t j) {
  return attention::dropoutFactor<double>(
      g, step, attention::probabilityIndex(g, b, h, i, j));
}

LogicalResult interpretAttention(AttentionOp op, OpContext &context) {
  AttentionGeometry g = op.getGeometry();
  const Tensor &q = context.get(op.getQuery()), &k = context.get(op.getKey()),
               &v = context.get(op.getValue());
  const Tensor *mask = op.getMask() ? &context.get(op.getMask()) : nullptr;
  int64_t step = context.options().dropoutStep, Dv = g.valueDim;
  Tensor out = context.like(op.getResult()),
         lse = context.like(op.getLogSumExp());
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t h = 0; h < g.heads; ++h) {
      int64_t bh = b * g.heads + h;
      int64_t kvh = b * g.kvHeads + attention::kvHeadOf(g, h);
      std::vector<double> p =
          probabilities(g, q, k, mask, b, h, &lse.data[bh * g.queries]);
      for (int64_t i = 0; i < g.queries; ++i) {
        for (int64_t e = 0; e < Dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < g.keys; ++j)
            acc += p[i * g.keys + j] * dropoutFactor(g, step, b, h, i, j) *
                   v.data[(kvh * g.keys + j) * Dv + e];
          out.data[(bh * g.queries + i) * Dv + e] = acc;
        }
      }
    }
  context.set(op.getResult(), std::move(out));
  return context.finish(op.getLogSumExp(), std::move(lse));
}

LogicalResult interpretAttentionGrad(AttentionGradOp op, OpContext &context) {
  AttentionGeometry g = op.getGeometry();
  const Tensor &q = context.get(op.getQuery()), &k = context.get(op.getKey()),
               &v = context.get(op.getValue()),
               &dOut = context.get(op.getGradOutput());
  const Tensor *mask = op.getMask() ? &context.get(op.getMask()) : nullptr;
  int64_t step = context.options().dropoutStep, D = g.headDim, Dv = g.valueDim,
          Tq = g.queries, Tk = g.keys;
  Tensor dq = context.like(op.getQueryGrad()),
         dk = context.like(op.getKeyGrad()),
         dv = context.like(op.getValueGrad());
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t h = 0; h < g.heads; ++h) {
      int64_t bh = b * g.heads + h;
      int64_t kvh = b * g.kvHeads + attention::kvHeadOf(g, h);
      std::vector<double> p = probabilities(g, q, k, mask, b, h);
      for (int64_t i = 0; i < Tq; ++i) {
        // dP~ = dO v^T; dP = z dP~; dS = P (dP - sum_j P dP).
        std::vector<double> dP(Tk);
        double dot = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          double x = 0;
          for (int64_t e = 0; e < Dv; ++e)
            x += dOut.data[(bh * Tq + i) * Dv + e] *
                 v.data[(kvh * Tk + j) * Dv + e];
          double z = dropoutFactor(g, step, b, h, i, j);
          dP[j] = z * x;
          dot += p[i * Tk + j] * dP[j];
          // dV_j += P~_ij dO_i.
          for (int64_t e = 0; e < Dv; ++e)
            dv.data[(kvh * Tk + j) * Dv + e] +=
                z * p[i * Tk + j] * dOut.data[(bh * Tq + i) * Dv + e];
        }
        for (int64_t j = 0; j < Tk; ++j) {
          double dS = p[i * Tk + j] * (dP[j] - dot) * g.scale;
          if (dS == 0)
            continue;
          for (int64_t d = 0; d < D; ++d) {
            dq.data[(bh * Tq + i) * D + d] +=
                dS * k.data[(kvh * Tk + j) * D + d];
            dk.data[(kvh * Tk + j) * D + d] +=
                dS * q.data[(bh * Tq + i) * D + d];
          }
        }
      }
    }
  context.set(op.getQueryGrad(), std::move(dq));
  context.set(op.getKeyGrad(), std::move(dk));
  return context.finish(op.getValueGrad(), std::move(dv));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerAttentionInterpreterModels(MLIRContext &context) {
  InterpreterFunction<AttentionOp, interpretAttention>::attach(context);
  InterpreterFunction<AttentionGradOp, interpretAttentionGrad>::attach(context);
}
