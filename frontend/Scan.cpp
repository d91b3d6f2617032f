//===- Scan.cpp - scan: a layer applied along a sequence axis
//--------------===//
//
// scan(cell, xs, state, args = [], axis = 1, reverse = false) runs `cell`
// (one layer instance, so one set of weights) once per position of xs along
// `axis`, threading its state: the step at t calls
//     cell(x_t, s_1, ..., s_k, args...)
// and the cell returns the k new states. The result is the tuple
//     (ys, s_1, ..., s_k)
// where ys stacks the first state of every step along `axis`, in sequence
// order (for reverse too, as torch's bidirectional RNNs do), and s_i are the
// final states.
//
// The loop is unrolled at compile time: the sequence length is a static
// dimension, every step's ops are ordinary graph ops, and the backward that
// autodiff derives is backpropagation through time, with what each step
// keeps planned by the memory planner (and recomputable by remat) like any
// other activation. The per-step slices of xs get their gradients back as
// one concat (passes/Backward.cpp joins slice gradients that tile a tensor),
// so the backward does not grow with the square of the length.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaInternal.h"

using namespace mnemo;
using namespace mnemo::sema;
using llvm::SMRange;

namespace {

/// The values a state argument holds: one tensor, or a tuple of them.
std::optional<std::vector<int>> stateTensors(Sema &s, const Val &state,
                                             SMRange range) {
  std::vector<Val> values =
      state.kind == Val::Kind::List ? state.list : std::vector<Val>{state};
  if (values.empty())
    return s.error(range.Start, "scan needs at least one state tensor",
                   {range});
  std::vector<int> tensors;
  for (const Val &v : values) {
    auto t = s.asFloatTensor(v, range, "each state of scan");
    if (!t)
      return std::nullopt;
    tensors.push_back(*t);
  }
  return tensors;
}

} // namespace

Val mnemo::sema::scanBuiltin(Sema &s, BoundArgs &a) {
  if (a.values[0].kind != Val::Kind::Layer)
    return s.error(
        a.ranges[0].Start,
        "scan's cell must be a layer (one instance, whose weights every "
        "step shares), not " +
            s.describe(a.values[0]),
        {a.ranges[0]});
  LayerInstance &cell = *a.values[0].layer;
  auto xs = a.asTensor(1, "the sequence of scan");
  auto state = stateTensors(s, a.values[2], a.ranges[2]);
  if (!xs || !state)
    return Val::error();
  std::vector<Val> extra;
  if (a.has(3))
    extra = a.values[3].kind == Val::Kind::List ? a.values[3].list
                                                : std::vector<Val>{a.values[3]};
  auto axis = a.intOr(4, 1, "axis");
  auto reverse = a.boolOr(5, false, "reverse");
  if (!axis || !reverse)
    return Val::error();

  TensorType seq = s.typeOf(*xs);
  auto n = shape::normalizeAxis(*axis, seq.shape.size());
  if (!n || seq.shape.size() < 2)
    return s.error(
        a.ranges[1].Start,
        "scan runs along axis " + std::to_string(*axis) + " of " + seq.str() +
            ", which it does not have (the sequence needs a batch or "
            "feature axis besides it)",
        {a.ranges[1]});
  int64_t length = seq.shape[*n];
  shape::Shape stepShape = seq.shape;
  stepShape.erase(stepShape.begin() + *n);

  std::vector<int> current = *state;
  std::vector<int> outputs(length, -1);
  for (int64_t step = 0; step < length; ++step) {
    int64_t t = *reverse ? length - 1 - step : step;
    shape::Shape sliced = seq.shape;
    sliced[*n] = 1;
    int piece = s.emit(
        "slice", {*xs}, {seq.dtype, sliced},
        {{"axis", *n}, {"start", t}, {"end", t + 1}, {"step", int64_t(1)}},
        a.loc);
    int input = s.emit("reshape", {piece}, {seq.dtype, stepShape}, {}, a.loc);
    std::vector<Val> args{Val::ofTensor(input)};
    for (int v : current)
      args.push_back(Val::ofTensor(v));
    args.insert(args.end(), extra.begin(), extra.end());
    Val result = s.callLayer(cell, std::move(args), a.loc);
    if (result.isError())
      return result;
    std::vector<Val> next =
        result.kind == Val::Kind::List ? result.list : std::vector<Val>{result};
    if (next.size() != current.size())
      return s.error(a.loc,
                     "scan's cell '" + cell.path + "' (" + cell.typeName +
                         ") returns " + std::to_string(next.size()) + " value" +
                         (next.size() == 1 ? "" : "s") + " but is given " +
                         std::to_string(current.size()) + " state" +
                         (current.size() == 1 ? "" : "s") +
                         ": it must return the new value of each",
                     {a.range});
    for (size_t i = 0; i < next.size(); ++i) {
      const TensorType &before = s.typeOf(current[i]);
      if (!next[i].isTensor() || s.typeOf(next[i].tensor) != before)
        return s.error(a.loc,
                       "scan's cell '" + cell.path + "' (" + cell.typeName +
                           ") returns " + s.describe(next[i]) + " as state " +
                           std::to_string(i + 1) + ", which is " +
                           before.str() +
                           ": a state keeps its type from step to step",
                       {a.range});
      current[i] = next[i].tensor;
    }
    outputs[t] = current[0];
  }

  // ys: the first state of each step, stacked along the axis. A copy of its
  // type: the reshapes below grow the value table a reference would point
  // into.
  TensorType first = s.typeOf(current[0]);
  if (*n > int64_t(first.shape.size()))
    return s.error(a.loc,
                   "cannot stack the outputs " + first.str() + " along axis " +
                       std::to_string(*n),
                   {a.range});
  shape::Shape expanded = first.shape;
  expanded.insert(expanded.begin() + *n, 1);
  std::vector<int> pieces;
  for (int out : outputs)
    pieces.push_back(
        s.emit("reshape", {out}, {first.dtype, expanded}, {}, a.loc));
  shape::Shape stacked = expanded;
  stacked[*n] = length;
  int ys = pieces.size() == 1 ? pieces[0]
                              : s.emit("concat", pieces, {first.dtype, stacked},
                                       {{"axis", *n}}, a.loc);
  Val tuple(Val::Kind::List);
  tuple.list.push_back(Val::ofTensor(ys));
  for (int v : current)
    tuple.list.push_back(Val::ofTensor(v));
  return tuple;
}
