//===- FuseAttention.cpp - Written-out attention to the fused op ----------===//
//
// See Passes.td (FuseAttention). The matcher starts at each softmax of
// @forward and walks out from it, as Inductor's SDPA pattern matcher does:
// up through an optional mask (where(mask, s, -inf) or s + bias) and an
// optional scale (s / c or s * c) to the product q @ k^T, down through an
// optional dropout to the product with v. The chain must be private (each
// intermediate read only by the next), the softmax along the last axis,
// and the pieces must make an attention the op takes (shape::attention).
// Grouped keys and values expanded for the product (reshape, broadcast,
// reshape, as MultiHeadAttention once wrote it) are read unexpanded; a
// square causal_mask becomes the causal rule (whole tiles skipped).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "lang/MnemoOps.h"
#include "lang/OpVerification.h"
#include "lang/PlanAttributes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cmath>
#include <optional>

namespace mnemo {
#define GEN_PASS_DEF_FUSEATTENTION
#include "passes/Passes.h.inc"
} // namespace mnemo

using namespace mlir;
using namespace mnemo;

namespace {

/// The value of a splat float constant, if `v` is one.
std::optional<double> splatValue(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat() ||
      !llvm::isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// `v`'s defining op when `v` is read only by `reader` (the chain's
/// intermediates must disappear with it).
template <typename Op> Op privateProducer(Value v, Operation *reader) {
  auto op = v.getDefiningOp<Op>();
  if (!op || !v.hasOneUse() || *v.getUsers().begin() != reader)
    return nullptr;
  return op;
}

/// The keys or values before a grouped-query expansion
/// reshape(broadcast(reshape(x, [.., Hkv, 1, T, D]), [.., Hkv, G, T, D]),
/// [.., H, T, D]); `v` itself when it is none.
Value unexpanded(Value v) {
  auto merge = v.getDefiningOp<ReshapeOp>();
  if (!merge)
    return v;
  auto broadcast = merge.getInput().getDefiningOp<BroadcastOp>();
  if (!broadcast)
    return v;
  auto split = broadcast.getInput().getDefiningOp<ReshapeOp>();
  if (!split)
    return v;
  Value source = split.getInput();
  ArrayRef<int64_t> src = verification::tensorType(source).getShape(),
                    one =
                        verification::tensorType(split.getResult()).getShape(),
                    wide = verification::tensorType(broadcast.getResult())
                               .getShape(),
                    out = verification::tensorType(v).getShape();
  size_t rank = src.size();
  if (rank < 3 || one.size() != rank + 1 || wide.size() != rank + 1 ||
      out.size() != rank)
    return v;
  // [.., Hkv, T, D] -> [.., Hkv, 1, T, D] -> [.., Hkv, G, T, D] -> [.., Hkv*G,
  // T, D]
  for (size_t d = 0; d + 3 < rank; ++d)
    if (one[d] != src[d] || wide[d] != src[d] || out[d] != src[d])
      return v;
  int64_t kvHeads = src[rank - 3], group = wide[rank - 2];
  if (one[rank - 3] != kvHeads || one[rank - 2] != 1 ||
      wide[rank - 3] != kvHeads || out[rank - 3] != kvHeads * group)
    return v;
  for (size_t d = rank - 2; d < rank; ++d)
    if (one[d + 1] != src[d] || wide[d + 1] != src[d] || out[d] != src[d])
      return v;
  return source;
}

/// The keys of scores = q @ k^T: a product's transposed right operand.
std::optional<std::pair<Value, Value>> queriesAndKeys(BatchMatmulOp product) {
  if (product.getTransposeLhs())
    return std::nullopt;
  Value q = product.getLhs(), rhs = product.getRhs();
  if (product.getTransposeRhs())
    return std::make_pair(q, rhs);
  auto transpose = rhs.getDefiningOp<TransposeOp>();
  if (!transpose)
    return std::nullopt;
  ArrayRef<int64_t> perm = transpose.getPermutation();
  size_t rank = perm.size();
  for (size_t d = 0; d + 2 < rank; ++d)
    if (perm[d] != int64_t(d))
      return std::nullopt;
  if (perm[rank - 2] != int64_t(rank - 1) ||
      perm[rank - 1] != int64_t(rank - 2))
    return std::nullopt;
  return std::make_pair(q, transpose.getInput());
}

struct Match {
  Value q, k, v, mask;
  bool causal = false;
  double scale = 1, dropout = 0;
  int64_t seed = 0;
  /// The chain, from the scores to the product with v.
  SmallVector<Operation *> chain;
};

/// The scaled scores `s` (what the mask applies to): s = q @ k^T, or it
/// divided or multiplied by a constant.
bool matchScaledScores(Value s, Operation *reader, Match &m) {
  Operation *def = s.getDefiningOp();
  if (!def || !s.hasOneUse() || *s.getUsers().begin() != reader)
    return false;
  Value scores = s;
  double scale = 1;
  if (auto div = llvm::dyn_cast<DivOp>(def)) {
    std::optional<double> c = splatValue(div.getRhs());
    if (!c || *c == 0)
      return false;
    scores = div.getLhs();
    scale = 1 / *c;
  } else if (auto mul = llvm::dyn_cast<MulOp>(def)) {
    std::optional<double> c = splatValue(mul.getRhs());
    scores = mul.getLhs();
    if (!c) {
      c = splatValue(mul.getLhs());
      scores = mul.getRhs();
    }
    if (!c)
      return false;
    scale = *c;
  }
  if (scores != s)
    m.chain.push_back(def);
  auto product =
      privateProducer<BatchMatmulOp>(scores, scores == s ? reader : def);
  if (!product)
    return false;
  std::optional<std::pair<Value, Value>> qk = queriesAndKeys(product);
  if (!qk)
    return false;
  m.chain.push_back(product);
  m.q = qk->first;
  m.k = qk->second;
  m.scale = scale;
  return true;
}

/// The mask at its own shape (before a broadcast to the scores'), and a
/// square causal_mask as the causal rule.
void setMask(Value mask, Match &m) {
  if (auto broadcast = mask.getDefiningOp<BroadcastOp>())
    mask = broadcast.getInput();
  if (auto causal = mask.getDefiningOp<CausalMaskOp>()) {
    ArrayRef<int64_t> shape = verification::tensorType(mask).getShape();
    if (shape[0] == shape[1]) {
      m.causal = true;
      return;
    }
  }
  m.mask = mask;
}

/// The softmax's input: the scaled scores, masked or not.
bool matchSoftmaxInput(SoftmaxOp softmax, Match &m) {
  Value x = softmax.getInput();
  if (auto where = privateProducer<WhereOp>(x, softmax)) {
    std::optional<double> off = splatValue(where.getOnFalse());
    if (off && std::isinf(*off) && *off < 0) {
      Match attempt = m;
      attempt.chain.push_back(where);
      if (matchScaledScores(where.getOnTrue(), where, attempt)) {
        setMask(where.getCondition(), attempt);
        m = attempt;
        return true;
      }
    }
    return false;
  }
  if (auto add = privateProducer<AddOp>(x, softmax)) {
    for (auto [scores, bias] : {std::pair(add.getLhs(), add.getRhs()),
                                std::pair(add.getRhs(), add.getLhs())}) {
      Match attempt = m;
      attempt.chain.push_back(add);
      if (matchScaledScores(scores, add, attempt)) {
        setMask(bias, attempt);
        m = attempt;
        return true;
      }
    }
    return false;
  }
  return matchScaledScores(x, softmax, m);
}

std::optional<Match> matchAttention(SoftmaxOp softmax) {
  auto type = verification::tensorType(softmax.getResult());
  if (type.getRank() < 3 || softmax.getNormalizedAxis() != type.getRank() - 1)
    return std::nullopt;
  Match m;
  // Down: [dropout] then the product with v.
  Value probabilities = softmax.getResult();
  if (!probabilities.hasOneUse())
    return std::nullopt;
  Operation *next = *probabilities.getUsers().begin();
  if (auto dropout = llvm::dyn_cast<DropoutOp>(next)) {
    m.dropout = dropout.getP().convertToDouble();
    m.seed = dropout.getSeed();
    probabilities = dropout.getResult();
    if (!probabilities.hasOneUse())
      return std::nullopt;
    next = *probabilities.getUsers().begin();
  }
  auto product = llvm::dyn_cast<BatchMatmulOp>(next);
  if (!product || product.getLhs() != probabilities ||
      product.getTransposeLhs() || product.getTransposeRhs() ||
      product.getRhs() == probabilities)
    return std::nullopt;
  m.v = product.getRhs();
  // Up: mask, scale, scores.
  if (!matchSoftmaxInput(softmax, m))
    return std::nullopt;
  std::reverse(m.chain.begin(), m.chain.end());
  m.chain.push_back(softmax);
  if (probabilities != softmax.getResult())
    m.chain.push_back(probabilities.getDefiningOp());
  m.chain.push_back(product);
  // Grouped keys and values, read unexpanded (both, or neither).
  Value k = unexpanded(m.k), v = unexpanded(m.v);
  if (k != m.k && v != m.v &&
      verification::tensorType(k).getShape().drop_back() ==
          verification::tensorType(v).getShape().drop_back()) {
    m.k = k;
    m.v = v;
  }
  // What the op takes.
  auto elementOf = [](Value x) {
    return verification::tensorType(x).getElementType();
  };
  Type element = elementOf(m.q);
  if (elementOf(m.k) != element || elementOf(m.v) != element)
    return std::nullopt;
  if (m.mask && !elementOf(m.mask).isInteger(1) && elementOf(m.mask) != element)
    return std::nullopt;
  shape::Shape maskShape =
      m.mask ? verification::shapeOf(m.mask) : shape::Shape();
  if (!shape::attention(verification::shapeOf(m.q), verification::shapeOf(m.k),
                        verification::shapeOf(m.v),
                        m.mask ? &maskShape : nullptr)
           .ok())
    return std::nullopt;
  if (!std::isfinite(m.scale) || m.scale == 0)
    return std::nullopt;
  return m;
}

struct FuseAttentionPass
    : public mnemo::impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    auto forward = getOperation().lookupSymbol<func::FuncOp>("forward");
    if (!forward)
      return;
    SmallVector<SoftmaxOp> softmaxes;
    forward.walk([&](SoftmaxOp op) { softmaxes.push_back(op); });
    OpBuilder builder(&getContext());
    for (SoftmaxOp softmax : softmaxes) {
      std::optional<Match> m = matchAttention(softmax);
      if (!m)
        continue;
      Operation *product = m->chain.back();
      builder.setInsertionPoint(product);
      Value out = product->getResult(0);
      SmallVector<int64_t> rows(verification::tensorType(m->q).getShape());
      rows.pop_back();
      SmallVector<Location> locations;
      for (Operation *op : m->chain)
        locations.push_back(op->getLoc());
      auto attention = builder.create<AttentionOp>(
          product->getLoc(),
          TypeRange{out.getType(),
                    RankedTensorType::get(rows, builder.getF32Type())},
          m->q, m->k, m->v, m->mask, builder.getBoolAttr(m->causal),
          builder.getF64FloatAttr(m->scale),
          builder.getF64FloatAttr(m->dropout),
          builder.getI64IntegerAttr(m->seed));
      // The report says where the rewrite fired (MemoryReport.cpp).
      plan::markRewrittenAttention(attention);
      out.replaceAllUsesWith(attention.getResult());
      // The chain, last first, then what only it read (the expansion of
      // grouped keys and values, the transposed keys, the mask's pieces).
      SmallVector<Operation *> dead(m->chain.rbegin(), m->chain.rend());
      for (size_t i = 0; i < dead.size(); ++i) {
        Operation *op = dead[i];
        SmallVector<Value> operands(op->getOperands());
        op->erase();
        for (Value operand : operands)
          if (Operation *def = operand.getDefiningOp())
            if (def->use_empty() && isMemoryEffectFree(def) &&
                !llvm::is_contained(dead, def))
              dead.push_back(def);
      }
    }
  }
};

} // namespace
