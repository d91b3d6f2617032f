//===- Builtins.cpp - The ops a model file can call ----------------------===//
//
// One entry per builtin: its parameters and how it types and emits graph ops.
// Shape checks go through lang/ShapeRules.h (the rules the op verifiers use);
// here they get worded against the source expression.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaInternal.h"

#include <cmath>
#include <cstdio>

using namespace mnemo;
using namespace mnemo::sema;
using llvm::SMRange;
using llvm::Twine;

namespace {

/// Reports a failed shape rule as "cannot <what> <operands>: <why>".
bool check(Sema &s, BoundArgs &a, const shape::ShapeResult &r,
           const std::string &what) {
  if (r.ok())
    return true;
  s.error(a.loc, "cannot " + what + ": " + r.error, {a.range});
  return false;
}

Val tensor(int id) { return Val::ofTensor(id); }

/// A unary elementwise op, named as its builtin; on a plain number it is
/// computed at compile time when `fold` is given (sqrt(head_dim) is a
/// number, not a tensor).
template <double (*fold)(double)> Val unary(Sema &s, BoundArgs &a) {
  const char *op = a.callee;
  const Val &x = a.values[0];
  if constexpr (fold != nullptr) {
    if (x.isNumber()) {
      double r = fold(x.number());
      if (std::isnan(r))
        return s.error(a.loc,
                       Twine(op) + " of " + s.describe(x) + " is undefined",
                       {a.range});
      return Val::ofFloat(r);
    }
  }
  auto t = s.asFloatTensor(x, a.ranges[0], Twine("the argument of ") + op);
  if (!t)
    return Val::error();
  return tensor(s.emit(op, {*t}, s.typeOf(*t), {}, a.loc));
}

double foldExp(double x) { return std::exp(x); }
double foldLog(double x) { return x > 0 ? std::log(x) : NAN; }
double foldSqrt(double x) { return x >= 0 ? std::sqrt(x) : NAN; }
double foldRsqrt(double x) { return x > 0 ? 1.0 / std::sqrt(x) : NAN; }
double foldTanh(double x) { return std::tanh(x); }
double foldSigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double foldRelu(double x) { return x > 0 ? x : 0; }
double foldSin(double x) { return std::sin(x); }
double foldCos(double x) { return std::cos(x); }

/// Normalized, sorted, duplicate-free axes; all axes when not given.
std::optional<std::vector<int64_t>> axesArg(Sema &s, BoundArgs &a, size_t slot,
                                            size_t rank) {
  std::vector<int64_t> axes;
  if (!a.has(slot)) {
    for (size_t i = 0; i < rank; ++i)
      axes.push_back(i);
    return axes;
  }
  auto given = a.asIntList(slot, "axis");
  if (!given)
    return std::nullopt;
  for (int64_t axis : *given) {
    auto n = shape::normalizeAxis(axis, rank);
    if (!n)
      return s.error(a.ranges[slot].Start,
                     "axis " + std::to_string(axis) +
                         " is out of range for rank " + std::to_string(rank),
                     {a.ranges[slot]});
    axes.push_back(*n);
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return s.error(a.ranges[slot].Start, "an axis is listed twice",
                   {a.ranges[slot]});
  return axes;
}

Val reduction(Sema &s, BoundArgs &a) {
  const char *op = a.callee;
  auto t = a.asFloatTensor(0, Twine("the input of ") + op);
  if (!t)
    return Val::error();
  TensorType in = s.typeOf(*t);
  auto axes = axesArg(s, a, 1, in.shape.size());
  auto keep = a.boolOr(2, false, "keepdim");
  if (!axes || !keep)
    return Val::error();
  shape::ShapeResult r = shape::reduce(in.shape, *axes, *keep);
  if (!check(s, a, r, std::string(op) + " " + in.str()))
    return Val::error();
  return tensor(s.emit(op, {*t}, {in.dtype, r.shape},
                       {{"axes", *axes}, {"keep_dims", *keep}}, a.loc));
}

/// `axis` of a tensor of type `in`, from 0 (Python's negative axes count
/// from the end); an error at `range` when it has no such axis.
std::optional<int64_t> axisOf(Sema &s, int64_t axis, const TensorType &in,
                              SMRange range) {
  if (auto n = shape::normalizeAxis(axis, in.shape.size()))
    return n;
  return s.error(range.Start,
                 "axis " + std::to_string(axis) + " is out of range for " +
                     in.str(),
                 {range});
}

Val softmaxLike(Sema &s, BoundArgs &a) {
  const char *op = a.callee;
  auto t = a.asFloatTensor(0, Twine("the input of ") + op);
  if (!t)
    return Val::error();
  TensorType in = s.typeOf(*t);
  auto axis = a.intOr(1, -1, "axis");
  if (!axis)
    return Val::error();
  auto n = axisOf(s, *axis, in, a.range);
  if (!n)
    return Val::error();
  return tensor(s.emit(op, {*t}, in, {{"axis", *n}}, a.loc));
}

/// A dropout probability at slot 1 (default 0.1), checked to be in [0, 1).
std::optional<double> dropProbability(Sema &s, BoundArgs &a, const char *op) {
  auto p = a.numberOr(1, 0.1, "p");
  if (p && !(*p >= 0 && *p < 1))
    return s.error(a.ranges[1].Start, std::string(op) + " p must be in [0, 1)",
                   {a.ranges[1]});
  return p;
}

/// An int or a pair of ints, as conv and pooling take them.
std::optional<std::vector<int64_t>> pairArg(Sema &s, BoundArgs &a, size_t slot,
                                            std::vector<int64_t> dflt,
                                            const char *what) {
  if (!a.has(slot))
    return dflt;
  auto v = a.asIntList(slot, what);
  if (!v)
    return std::nullopt;
  if (v->size() == 1)
    v->push_back(v->front());
  if (v->size() != 2)
    return s.error(a.ranges[slot].Start,
                   Twine(what) + " must be an integer or a pair",
                   {a.ranges[slot]});
  return v;
}

/// conv2d and conv_transpose2d, as torch.nn.functional's. The transposed
/// convolution is the gradient of conv2d's input, which is the op
/// (mnemo.conv2d_input_grad).
Val convolution(Sema &s, BoundArgs &a) {
  const char *op = a.callee;
  bool transposed = llvm::StringRef(op) == "conv_transpose2d";
  auto x = a.asFloatTensor(0, Twine("the input of ") + op);
  auto w = a.asFloatTensor(1, Twine("the weight of ") + op);
  auto stride = pairArg(s, a, 2, {1, 1}, "stride");
  auto padding = pairArg(s, a, 3, {0, 0}, "padding");
  auto outputPadding = transposed ? pairArg(s, a, 4, {0, 0}, "output_padding")
                                  : std::vector<int64_t>{0, 0};
  if (!x || !w || !stride || !padding || !outputPadding)
    return Val::error();
  TensorType in = s.typeOf(*x), wt = s.typeOf(*w);
  std::string what = std::string(op) + " " + in.str() + " with " + wt.str();
  if (in.dtype != wt.dtype)
    return s.error(a.loc, "cannot " + what + ": element types differ",
                   {a.range});
  shape::ShapeResult r =
      transposed ? shape::convTranspose2d(in.shape, wt.shape, *stride, *padding,
                                          *outputPadding)
                 : shape::conv2d(in.shape, wt.shape, *stride, *padding);
  if (!check(s, a, r, what))
    return Val::error();
  return tensor(s.emit(transposed ? "conv2d_input_grad" : "conv2d", {*x, *w},
                       {in.dtype, r.shape},
                       {{"stride", *stride}, {"padding", *padding}}, a.loc));
}

Val pool(Sema &s, BoundArgs &a) {
  const char *op = a.callee;
  auto t = a.asFloatTensor(0, Twine("the input of ") + op);
  auto kernel = pairArg(s, a, 1, {}, "kernel");
  if (!t || !kernel)
    return Val::error();
  auto stride = pairArg(s, a, 2, *kernel, "stride");
  auto padding = pairArg(s, a, 3, {0, 0}, "padding");
  if (!stride || !padding)
    return Val::error();
  TensorType in = s.typeOf(*t);
  shape::ShapeResult r = shape::pool2d(in.shape, *kernel, *stride, *padding);
  if (!check(s, a, r, std::string(op) + " " + in.str()))
    return Val::error();
  return tensor(
      s.emit(op, {*t}, {in.dtype, r.shape},
             {{"kernel", *kernel}, {"stride", *stride}, {"padding", *padding}},
             a.loc));
}

Val reshapeTo(Sema &s, BoundArgs &a, int t, const shape::Shape &requested) {
  TensorType in = s.typeOf(t);
  shape::ShapeResult r = shape::reshape(in.shape, requested);
  if (!check(s, a, r,
             "reshape " + in.str() + " to " + shape::format(requested)))
    return Val::error();
  return tensor(s.emit("reshape", {t}, {in.dtype, r.shape}, {}, a.loc));
}

/// torch.nn.functional.batch_norm(x, running_mean, running_var, weight,
/// bias, training, momentum, eps) over [N, C, ...]. In training: the batch's
/// statistics (one batch_norm op), and running_mean and running_var, when
/// given, updated in place as PyTorch does (the variance unbiased); they
/// must then be buffers. In evaluation: the running statistics, as
/// x * scale + shift with [C] scale and shift (elementwise, fused).
Val batchNorm(Sema &s, BoundArgs &a) {
  auto x = a.asFloatTensor(0, "the input of batch_norm");
  if (!x)
    return Val::error();
  TensorType in = s.typeOf(*x);
  if (in.shape.size() < 2)
    return s.error(a.ranges[0].Start,
                   "batch_norm needs [batch, channels, ...], not " + in.str(),
                   {a.ranges[0]});
  int64_t channels = in.shape[1];
  TensorType perChannel{ElementType::F32, {channels}};
  // Operand `slot` as a [C] f32 tensor, or nullopt after an error; -1
  // when not given.
  auto channelArg = [&](size_t slot, const char *what) -> std::optional<int> {
    if (!a.has(slot))
      return -1;
    auto t = a.asFloatTensor(slot, what);
    if (!t)
      return std::nullopt;
    if (s.typeOf(*t) != perChannel)
      return s.error(a.ranges[slot].Start,
                     std::string(what) + " must be " + perChannel.str() +
                         " for " + in.str() + ", not " + s.typeOf(*t).str(),
                     {a.ranges[slot]});
    return *t;
  };
  auto mean = channelArg(1, "running_mean");
  auto var = channelArg(2, "running_var");
  auto weight = channelArg(3, "weight");
  auto bias = channelArg(4, "bias");
  auto training = a.boolOr(5, false, "training");
  auto momentum = a.numberOr(6, 0.1, "momentum");
  auto eps = a.numberOr(7, 1e-5, "eps");
  if (!mean || !var || !weight || !bias || !training || !momentum || !eps)
    return Val::error();
  if ((*mean < 0) != (*var < 0))
    return s.error(a.loc,
                   "batch_norm takes both running_mean and running_var, or "
                   "neither",
                   {a.range});
  if (!(*eps > 0) || !(*momentum >= 0 && *momentum <= 1))
    return s.error(a.loc, "batch_norm needs eps > 0 and momentum in [0, 1]",
                   {a.range});
  auto number = [](double v) { return Val::ofFloat(v); };
  auto op = [&](BinaryOp kind, Val lhs, Val rhs) {
    return s.binary(kind, lhs, rhs, a.loc, a.range, a.range);
  };
  // A [C] value as [C, 1, ...], which broadcasts over [N, C, ...].
  auto spread = [&](Val v) {
    shape::Shape column(in.shape.size() - 1, 1);
    column[0] = channels;
    return tensor(s.emit("reshape", {v.tensor},
                         {s.typeOf(v.tensor).dtype, column}, {}, a.loc));
  };
  if (!*training) {
    if (*mean < 0)
      return s.error(
          a.loc, "batch_norm in evaluation needs running_mean and running_var",
          {a.range});
    // As PyTorch's kernel: scale = weight / sqrt(var + eps), shift = bias
    // - mean * scale, y = x * scale + shift.
    Val scale = tensor(
        s.emit("rsqrt", {op(BinaryOp::Add, tensor(*var), number(*eps)).tensor},
               perChannel, {}, a.loc));
    if (*weight >= 0)
      scale = op(BinaryOp::Mul, scale, tensor(*weight));
    Val shift = op(BinaryOp::Mul, tensor(*mean), scale);
    shift = *bias >= 0 ? op(BinaryOp::Sub, tensor(*bias), shift)
                       : op(BinaryOp::Sub, number(0.0), shift);
    if (scale.isError() || shift.isError())
      return Val::error();
    return op(BinaryOp::Add, op(BinaryOp::Mul, tensor(*x), spread(scale)),
              spread(shift));
  }
  int64_t count = shape::numElements(in.shape).value_or(0) / channels;
  if (count < 2)
    return s.error(
        a.loc,
        "batch_norm in training needs more than one value a channel, and " +
            in.str() + " has " + std::to_string(count),
        {a.range});
  int scale = *weight >= 0 ? *weight : s.splat(1.0, perChannel, a.loc);
  int shift = *bias >= 0 ? *bias : s.splat(0.0, perChannel, a.loc);
  std::vector<int> results =
      s.emitResults("batch_norm", {*x, scale, shift},
                    {in, perChannel, perChannel}, {{"epsilon", *eps}}, a.loc);
  if (*mean >= 0) {
    // running = momentum * batch + (1 - momentum) * running, with the
    // batch's unbiased variance (PyTorch's order of operations).
    double m = *momentum, unbias = double(count) / double(count - 1);
    Val newMean =
        op(BinaryOp::Add, op(BinaryOp::Mul, number(m), tensor(results[1])),
           op(BinaryOp::Mul, number(1 - m), tensor(*mean)));
    Val newVar = op(BinaryOp::Add,
                    op(BinaryOp::Mul, number(m * unbias), tensor(results[2])),
                    op(BinaryOp::Mul, number(1 - m), tensor(*var)));
    if (newMean.isError() || newVar.isError())
      return Val::error();
    if (!s.updateBuffer(*mean, newMean.tensor) ||
        !s.updateBuffer(*var, newVar.tensor))
      return s.error(
          a.loc,
          "batch_norm in training updates running_mean and running_var "
          "in place, so they must be buffers (declared 'buffer "
          "running_mean: f32[C] = zeros')",
          {a.range});
  }
  return tensor(results[0]);
}

/// torch.nn.functional.interpolate(x, scale_factor = scale, mode) of
/// [N, C, H, W] by an integer factor, written with ops that exist: nearest
/// repeats each pixel (a broadcast between reshapes); bilinear is
/// separable, one axis after the other, each output a weighted sum of two
/// inputs at PyTorch's source index (clamped at 0, with align_corners or
/// without). Their gradients are the ops'.
/// upsample's output size and the ratios from output to source
/// coordinates: F.interpolate takes a scale factor (an output of
/// floor(size * scale)) or the output's size; the source coordinate of an
/// output pixel is its coordinate times 1 / scale (as PyTorch, which uses
/// the given factor) or times in / out (a size).
struct UpsampleSize {
  int64_t height = 0, width = 0;
  double ratioH = 0, ratioW = 0;
};
std::optional<UpsampleSize> upsampleSize(Sema &s, BoundArgs &a,
                                         const TensorType &in) {
  int64_t h = in.shape[2], w = in.shape[3];
  if (a.has(1) == a.has(4))
    return s.error(a.loc, "upsample takes a scale or a size (one of them)",
                   {a.range});
  UpsampleSize out;
  if (a.has(1)) {
    auto scale = a.asNumber(1, "scale");
    if (!scale)
      return std::nullopt;
    out.height = int64_t(std::floor(double(h) * *scale));
    out.width = int64_t(std::floor(double(w) * *scale));
    if (!(*scale > 0) || out.height < 1 || out.width < 1 ||
        out.height > (int64_t(1) << 20) || out.width > (int64_t(1) << 20))
      return s.error(a.ranges[1].Start,
                     "a scale of " + s.describe(a.values[1]) +
                         " gives no image of " + in.str() +
                         " (an output of 1 to 2^20 pixels a side)",
                     {a.ranges[1]});
    out.ratioH = out.ratioW = 1.0 / *scale;
    return out;
  }
  auto size = a.asIntList(4, "size");
  if (!size)
    return std::nullopt;
  if (size->size() != 2 || (*size)[0] < 1 || (*size)[1] < 1)
    return s.error(a.ranges[4].Start,
                   "size is [height, width], both positive, not " +
                       s.describe(a.values[4]),
                   {a.ranges[4]});
  out.height = (*size)[0];
  out.width = (*size)[1];
  out.ratioH = double(h) / double(out.height);
  out.ratioW = double(w) / double(out.width);
  return out;
}

/// Resamples `value` along its first axis from `size` to `out` entries, as
/// PyTorch does along one axis: output o reads input i0 (and, bilinear,
/// i1, with weights 1 - lambda and lambda). The rest is flattened, so
/// embedding lookups (with constant indices) fetch the rows, and a
/// bilinear weighted sum is one fused loop; the lookups' gradient is a
/// scatter-add.
Val resampleFirstAxis(Sema &s, BoundArgs &a, int value, int64_t size,
                      int64_t out, double ratio, bool nearest,
                      bool alignCorners) {
  TensorType t = s.typeOf(value); // a copy: emitting adds values
  int64_t rest = shape::numElements(t.shape).value_or(0) / size;
  std::vector<double> first(out), second(out), w0(out), w1(out);
  for (int64_t o = 0; o < out; ++o) {
    if (nearest) {
      // In float, as PyTorch's nearest_idx computes it (an output on a
      // multiple of the ratio must land on the same input pixel).
      float scale = float(ratio);
      first[o] = double(
          std::min<int64_t>(int64_t(std::floor(float(o) * scale)), size - 1));
      continue;
    }
    double source =
        alignCorners
            ? (out > 1 ? double(o) * double(size - 1) / double(out - 1) : 0)
            : std::max(0.0, (double(o) + 0.5) * ratio - 0.5);
    int64_t i0 = std::min<int64_t>(int64_t(source), size - 1);
    first[o] = double(i0);
    second[o] = double(i0 + (i0 < size - 1 ? 1 : 0));
    w1[o] = source - double(i0);
    w0[o] = 1.0 - w1[o];
  }
  int table = s.emit("reshape", {value}, {t.dtype, {size, rest}}, {}, a.loc);
  auto rows = [&](const std::vector<double> &indices) {
    int idx = s.emit("constant", {}, {ElementType::I32, {out}},
                     {{"value", indices}}, a.loc);
    return tensor(
        s.emit("embedding", {table, idx}, {t.dtype, {out, rest}}, {}, a.loc));
  };
  shape::Shape shape = t.shape;
  shape[0] = out;
  if (nearest)
    return tensor(
        s.emit("reshape", {rows(first).tensor}, {t.dtype, shape}, {}, a.loc));
  auto weight = [&](const std::vector<double> &w) {
    return tensor(
        s.emit("constant", {}, {t.dtype, {out, 1}}, {{"value", w}}, a.loc));
  };
  Val sum = s.binary(
      BinaryOp::Add,
      s.binary(BinaryOp::Mul, rows(first), weight(w0), a.loc, a.range, a.range),
      s.binary(BinaryOp::Mul, rows(second), weight(w1), a.loc, a.range,
               a.range),
      a.loc, a.range, a.range);
  if (sum.isError())
    return sum;
  return tensor(s.emit("reshape", {sum.tensor}, {t.dtype, shape}, {}, a.loc));
}

Val upsample(Sema &s, BoundArgs &a) {
  auto x = a.asFloatTensor(0, "the input of upsample");
  if (!x)
    return Val::error();
  TensorType in = s.typeOf(*x);
  if (in.shape.size() != 4)
    return s.error(a.ranges[0].Start,
                   "upsample takes [N, C, H, W], not " + in.str(),
                   {a.ranges[0]});
  int64_t n = in.shape[0], c = in.shape[1], h = in.shape[2], w = in.shape[3];
  std::optional<UpsampleSize> out = upsampleSize(s, a, in);
  if (!out)
    return Val::error();
  std::string mode = "nearest";
  if (a.has(2)) {
    if (a.values[2].kind != Val::Kind::String ||
        (a.values[2].s != "nearest" && a.values[2].s != "bilinear"))
      return s.error(a.ranges[2].Start,
                     "mode must be \"nearest\" or \"bilinear\", not " +
                         (a.values[2].kind == Val::Kind::String
                              ? "\"" + a.values[2].s + "\""
                              : s.describe(a.values[2])),
                     {a.ranges[2]});
    mode = a.values[2].s;
  }
  std::optional<bool> alignCorners = a.boolOr(3, false, "align_corners");
  if (!alignCorners)
    return Val::error();
  if (mode == "nearest" && out->height % h == 0 && out->width % w == 0 &&
      out->height / h == out->width / w &&
      out->ratioH * double(out->height / h) == 1.0) {
    // An integer factor: each pixel repeated f x f times, a broadcast.
    int64_t f = out->height / h;
    int pixels =
        s.emit("reshape", {*x}, {in.dtype, {n, c, h, 1, w, 1}}, {}, a.loc);
    int repeated = s.broadcastTo(pixels, {n, c, h, f, w, f}, a.loc);
    return tensor(s.emit("reshape", {repeated},
                         {in.dtype, {n, c, h * f, w * f}}, {}, a.loc));
  }
  // Along one axis at a time, as PyTorch: the axis is moved first.
  auto permute = [&](int value, std::vector<int64_t> order) {
    TensorType t = s.typeOf(value);
    shape::Shape shape;
    for (int64_t d : order)
      shape.push_back(t.shape[d]);
    return s.emit("transpose", {value}, {t.dtype, shape},
                  {{"permutation", order}}, a.loc);
  };
  bool nearest = mode == "nearest";
  // [N, C, H, W] -> [H, N, C, W] -> (H') -> [W, N, C, H'] -> (W') ->
  // [N, C, H', W'].
  Val alongH =
      resampleFirstAxis(s, a, permute(*x, {2, 0, 1, 3}), h, out->height,
                        out->ratioH, nearest, *alignCorners);
  if (alongH.isError())
    return alongH;
  Val alongW =
      resampleFirstAxis(s, a, permute(alongH.tensor, {3, 1, 2, 0}), w,
                        out->width, out->ratioW, nearest, *alignCorners);
  if (alongW.isError())
    return alongW;
  return tensor(permute(alongW.tensor, {1, 2, 3, 0}));
}

/// Loss operands: the prediction must be floating point.
Val loss(Sema &s, BoundArgs &a) {
  const char *op = a.callee;
  auto pred = a.asFloatTensor(0, Twine("the prediction of ") + op);
  auto target = a.asTensor(1, Twine("the target of ") + op);
  if (!pred || !target)
    return Val::error();
  TensorType p = s.typeOf(*pred), t = s.typeOf(*target);
  if (std::string(op) == "cross_entropy") {
    if (t.dtype != ElementType::I32 && t.dtype != ElementType::I8)
      return s.error(a.ranges[1].Start,
                     "cross_entropy needs integer class targets, not " +
                         t.str(),
                     {a.ranges[1]});
    if (!check(s, a, shape::crossEntropy(p.shape, t.shape),
               "take cross_entropy of " + p.str() + " and " + t.str()))
      return Val::error();
    // torch.nn.functional.cross_entropy's ignore_index and label_smoothing.
    auto ignoreIndex = a.intOr(2, -100, "ignore_index");
    auto smoothing = a.numberOr(3, 0.0, "label_smoothing");
    if (!ignoreIndex || !smoothing)
      return Val::error();
    if (!(*smoothing >= 0 && *smoothing <= 1))
      return s.error(a.ranges[3].Start, "label_smoothing must be in [0, 1]",
                     {a.ranges[3]});
    return tensor(s.emit(
        op, {*pred, *target}, {p.dtype, {}},
        {{"ignore_index", *ignoreIndex}, {"label_smoothing", *smoothing}},
        a.loc));
  }
  if (p != t)
    return s.error(a.loc,
                   "cannot take mse of " + p.str() + " and " + t.str() +
                       ": the types must match",
                   {a.range});
  return tensor(s.emit(op, {*pred, *target}, {p.dtype, {}}, {}, a.loc));
}

/// The most elements `arange` makes: its values are a constant in the IR and
/// in the generated source (a static array), not a buffer filled at run time.
constexpr int64_t kMaxArangeElements = int64_t(1) << 20;

/// torch.arange: start + i * step for i = 0, 1, ... while below `end` (above
/// it for a negative step), computed in double and rounded to f32 as
/// PyTorch's CPU kernel does. One argument is `end`, from 0.
Val arange(Sema &s, BoundArgs &a) {
  auto first = a.asNumber(0, "the start of arange");
  auto end = a.numberOr(1, 0, "the end of arange");
  auto step = a.numberOr(2, 1, "the step of arange");
  if (!first || !end || !step)
    return Val::error();
  double start = a.has(1) ? *first : 0, stop = a.has(1) ? *end : *first;
  if (*step == 0 || !std::isfinite(*step) || !std::isfinite(start) ||
      !std::isfinite(stop))
    return s.error(a.loc, "arange needs finite bounds and a non-zero step",
                   {a.range});
  double count = std::ceil((stop - start) / *step);
  if (!(count >= 1) || count > double(kMaxArangeElements)) {
    auto text = [](double v) {
      char digits[32];
      std::snprintf(digits, sizeof digits, "%.15g", v);
      return std::string(digits);
    };
    return s.error(a.loc,
                   "arange from " + text(start) + " to " + text(stop) + " by " +
                       text(*step) + " has " +
                       (count >= 1
                            ? "more than " + std::to_string(kMaxArangeElements)
                            : std::string("no")) +
                       " elements",
                   {a.range});
  }
  std::vector<double> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = start + double(i) * *step;
  return tensor(s.emit("constant", {}, {ElementType::F32, {int64_t(count)}},
                       {{"value", std::move(values)}}, a.loc));
}

const std::vector<Builtin> kBuiltins = {
    {"exp", {"x"}, 1, unary<foldExp>},
    {"log", {"x"}, 1, unary<foldLog>},
    {"sqrt", {"x"}, 1, unary<foldSqrt>},
    {"rsqrt", {"x"}, 1, unary<foldRsqrt>},
    {"tanh", {"x"}, 1, unary<foldTanh>},
    {"sigmoid", {"x"}, 1, unary<foldSigmoid>},
    {"sin", {"x"}, 1, unary<foldSin>},
    {"cos", {"x"}, 1, unary<foldCos>},
    {"arange", {"start", "end", "step"}, 1, arange},
    {"full",
     {"shape", "value", "dtype"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       // torch.full: a constant tensor (an RNN's zero initial state).
       auto dims = a.asIntList(0, "the shape of full");
       auto value = a.asNumber(1, "the value of full");
       auto dtype = a.has(2) ? a.asDType(2, "the dtype of full")
                             : std::optional(ElementType::F32);
       if (!dims || !value || !dtype)
         return Val::error();
       for (int64_t d : *dims)
         if (d < 1)
           return s.error(a.ranges[0].Start,
                          "the dimensions of full must be positive, not " +
                              std::to_string(d),
                          {a.ranges[0]});
       return tensor(s.splat(*value, {*dtype, *dims}, a.loc));
     }},
    {"relu", {"x"}, 1, unary<foldRelu>},
    {"silu", {"x"}, 1, unary<nullptr>},
    {"gelu",
     {"x", "approximate"},
     1,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asFloatTensor(0, "the argument of gelu");
       auto approx = a.boolOr(1, false, "approximate");
       if (!t || !approx)
         return Val::error();
       return tensor(s.emit("gelu", {*t}, s.typeOf(*t),
                            {{"approximate", *approx}}, a.loc));
     }},
    {"softplus",
     {"x", "beta", "threshold"},
     1,
     [](Sema &s, BoundArgs &a) -> Val {
       // torch.nn.functional.softplus's defaults.
       auto t = a.asFloatTensor(0, "the argument of softplus");
       auto beta = a.numberOr(1, 1.0, "beta");
       auto threshold = a.numberOr(2, 20.0, "threshold");
       if (!t || !beta || !threshold)
         return Val::error();
       return tensor(s.emit("softplus", {*t}, s.typeOf(*t),
                            {{"beta", *beta}, {"threshold", *threshold}},
                            a.loc));
     }},
    {"pow",
     {"x", "exponent"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       return s.binary(BinaryOp::Pow, a.values[0], a.values[1], a.loc,
                       a.ranges[0], a.ranges[1]);
     }},
    {"matmul",
     {"a", "b"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       return s.binary(BinaryOp::MatMul, a.values[0], a.values[1], a.loc,
                       a.ranges[0], a.ranges[1]);
     }},
    {"sum", {"x", "axis", "keepdim"}, 1, reduction},
    {"mean", {"x", "axis", "keepdim"}, 1, reduction},
    {"max", {"x", "axis", "keepdim"}, 1, reduction},
    {"logsumexp",
     {"x", "axis", "keepdim"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asFloatTensor(0, "the input of logsumexp");
       auto axis = a.asInt(1, "axis");
       auto keep = a.boolOr(2, false, "keepdim");
       if (!t || !axis || !keep)
         return Val::error();
       TensorType in = s.typeOf(*t);
       shape::ShapeResult r = shape::reduce(in.shape, {*axis}, *keep);
       if (!check(s, a, r, "take logsumexp of " + in.str()))
         return Val::error();
       return tensor(s.emit("logsumexp", {*t}, {in.dtype, r.shape},
                            {{"axis", *axis}, {"keep_dims", *keep}}, a.loc));
     }},
    {"softmax", {"x", "axis"}, 1, softmaxLike},
    {"log_softmax", {"x", "axis"}, 1, softmaxLike},
    {"layernorm",
     {"x", "scale", "bias", "eps"},
     3,
     [](Sema &s, BoundArgs &a) -> Val {
       auto x = a.asFloatTensor(0, "the input of layernorm");
       auto g = a.asFloatTensor(1, "the scale of layernorm");
       auto b = a.asFloatTensor(2, "the bias of layernorm");
       auto eps = a.numberOr(3, 1e-5, "eps");
       if (!x || !g || !b || !eps)
         return Val::error();
       TensorType in = s.typeOf(*x);
       if (!check(s, a, shape::lastDimNorm(in.shape, s.typeOf(*g).shape),
                  "layernorm " + in.str() + " with scale " +
                      s.typeOf(*g).str()) ||
           !check(s, a, shape::lastDimNorm(in.shape, s.typeOf(*b).shape),
                  "layernorm " + in.str() + " with bias " + s.typeOf(*b).str()))
         return Val::error();
       if (s.typeOf(*g).dtype != s.typeOf(*b).dtype)
         return s.error(
             a.loc,
             "the scale and bias of layernorm must have one element type",
             {a.range});
       return tensor(
           s.emit("layernorm", {*x, *g, *b}, in, {{"epsilon", *eps}}, a.loc));
     }},
    {"batch_norm",
     {"x", "running_mean", "running_var", "weight", "bias", "training",
      "momentum", "eps"},
     1,
     batchNorm},
    {"rmsnorm",
     {"x", "scale", "eps"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       auto x = a.asFloatTensor(0, "the input of rmsnorm");
       auto g = a.asFloatTensor(1, "the scale of rmsnorm");
       auto eps = a.numberOr(2, 1e-6, "eps");
       if (!x || !g || !eps)
         return Val::error();
       TensorType in = s.typeOf(*x);
       if (!check(s, a, shape::lastDimNorm(in.shape, s.typeOf(*g).shape),
                  "rmsnorm " + in.str() + " with scale " + s.typeOf(*g).str()))
         return Val::error();
       return tensor(
           s.emit("rmsnorm", {*x, *g}, in, {{"epsilon", *eps}}, a.loc));
     }},
    {"embedding",
     {"table", "indices"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       auto table = a.asFloatTensor(0, "the embedding table");
       auto idx = a.asTensor(1, "the indices");
       if (!table || !idx)
         return Val::error();
       TensorType tt = s.typeOf(*table), it = s.typeOf(*idx);
       if (it.dtype != ElementType::I32 && it.dtype != ElementType::I8)
         return s.error(a.ranges[1].Start,
                        "embedding indices must be integers, not " + it.str(),
                        {a.ranges[1]});
       shape::ShapeResult r = shape::embedding(tt.shape, it.shape);
       if (!check(s, a, r, "look up " + it.str() + " in " + tt.str()))
         return Val::error();
       return tensor(
           s.emit("embedding", {*table, *idx}, {tt.dtype, r.shape}, {}, a.loc));
     }},
    {"reshape",
     {"x", "shape"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asTensor(0, "the input of reshape");
       auto dims = a.asIntList(1, "the shape");
       if (!t || !dims)
         return Val::error();
       return reshapeTo(s, a, *t, *dims);
     }},
    {"flatten",
     {"x", "start"},
     1,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asTensor(0, "the input of flatten");
       if (!t)
         return Val::error();
       TensorType in = s.typeOf(*t);
       auto start = a.intOr(1, 1, "start");
       if (!start)
         return Val::error();
       auto n = shape::normalizeAxis(*start, in.shape.size());
       if (!n)
         return s.error(a.loc,
                        "cannot flatten " + in.str() + " from axis " +
                            std::to_string(*start),
                        {a.range});
       shape::Shape out(in.shape.begin(), in.shape.begin() + *n);
       out.push_back(-1);
       return reshapeTo(s, a, *t, out);
     }},
    {"transpose",
     {"x", "dim0", "dim1"},
     1,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asTensor(0, "the input of transpose");
       if (!t)
         return Val::error();
       TensorType in = s.typeOf(*t);
       auto d0 = a.intOr(1, -2, "dim0");
       auto d1 = a.intOr(2, -1, "dim1");
       if (!d0 || !d1)
         return Val::error();
       auto n0 = shape::normalizeAxis(*d0, in.shape.size());
       auto n1 = shape::normalizeAxis(*d1, in.shape.size());
       if (!n0 || !n1)
         return s.error(a.loc,
                        "cannot transpose axes " + std::to_string(*d0) +
                            " and " + std::to_string(*d1) + " of " + in.str(),
                        {a.range});
       std::vector<int64_t> perm;
       for (size_t i = 0; i < in.shape.size(); ++i)
         perm.push_back(i);
       std::swap(perm[*n0], perm[*n1]);
       shape::ShapeResult r = shape::transpose(in.shape, perm);
       return tensor(s.emit("transpose", {*t}, {in.dtype, r.shape},
                            {{"permutation", perm}}, a.loc));
     }},
    {"permute",
     {"x", "dims"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asTensor(0, "the input of permute");
       auto dims = a.asIntList(1, "dims");
       if (!t || !dims)
         return Val::error();
       TensorType in = s.typeOf(*t);
       for (int64_t &d : *dims)
         if (auto n = shape::normalizeAxis(d, in.shape.size()))
           d = *n;
       shape::ShapeResult r = shape::transpose(in.shape, *dims);
       if (!check(s, a, r, "permute " + in.str()))
         return Val::error();
       return tensor(s.emit("transpose", {*t}, {in.dtype, r.shape},
                            {{"permutation", *dims}}, a.loc));
     }},
    {"broadcast",
     {"x", "shape"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asTensor(0, "the input of broadcast");
       auto dims = a.asIntList(1, "the shape");
       if (!t || !dims)
         return Val::error();
       TensorType in = s.typeOf(*t);
       if (!check(s, a, shape::broadcastTo(in.shape, *dims),
                  "broadcast " + in.str() + " to " + shape::format(*dims)))
         return Val::error();
       return tensor(s.broadcastTo(*t, *dims, a.loc));
     }},
    {"slice",
     {"x", "axis", "start", "end", "step"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asTensor(0, "the input of slice");
       auto axis = a.asInt(1, "axis");
       if (!t || !axis)
         return Val::error();
       TensorType in = s.typeOf(*t);
       auto n = axisOf(s, *axis, in, a.ranges[1]);
       if (!n)
         return Val::error();
       int64_t dim = in.shape[*n];
       int64_t bounds[3] = {0, dim, 1};
       const char *names[3] = {"start", "end", "step"};
       for (int k = 0; k < 3; ++k) {
         if (!a.has(2 + k))
           continue;
         auto v = a.asInt(2 + k, names[k]);
         if (!v)
           return Val::error();
         bounds[k] = *v;
       }
       shape::ShapeResult r =
           shape::slice(in.shape, *n, bounds[0], bounds[1], bounds[2]);
       if (!check(s, a, r, "slice " + in.str()))
         return Val::error();
       auto clampIndex = [dim](int64_t i) {
         if (i < 0)
           i = i < -dim ? 0 : i + dim;
         return std::min(i, dim);
       };
       return tensor(s.emit("slice", {*t}, {in.dtype, r.shape},
                            {{"axis", *n},
                             {"start", clampIndex(bounds[0])},
                             {"end", clampIndex(bounds[1])},
                             {"step", bounds[2]}},
                            a.loc));
     }},
    {"pad",
     {"x", "pad", "value"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       // F.pad's constant mode: `pad` lists (before, after) amounts for the
       // last axis, then the one before it, ...; a negative amount crops.
       auto t = a.asFloatTensor(0, "the input of pad");
       auto amounts = a.asIntList(1, "pad");
       auto value = a.numberOr(2, 0.0, "value");
       if (!t || !amounts || !value)
         return Val::error();
       TensorType in = s.typeOf(*t);
       size_t rank = in.shape.size();
       if (amounts->size() % 2 || amounts->empty() ||
           amounts->size() > 2 * rank)
         return s.error(
             a.ranges[1].Start,
             "pad takes pairs of amounts (before, after), from the last "
             "axis backwards: at most " +
                 std::to_string(rank) + " pairs for " + in.str() + ", not " +
                 std::to_string(amounts->size()) + " numbers",
             {a.ranges[1]});
       // x's entries placed in zeros of the larger shape (slice_grad, whose
       // gradient is the slice back out), axis by axis.
       auto place = [&](int operand) -> std::optional<int> {
         TensorType type = in;
         for (size_t pair = 0; pair < amounts->size() / 2; ++pair) {
           int64_t axis = int64_t(rank - 1 - pair);
           int64_t before = (*amounts)[2 * pair],
                   after = (*amounts)[2 * pair + 1];
           int64_t dim = type.shape[axis];
           int64_t start = std::max<int64_t>(-before, 0);
           int64_t end = dim - std::max<int64_t>(-after, 0);
           if (end <= start)
             return s.error(a.ranges[1].Start,
                            "padding (" + std::to_string(before) + ", " +
                                std::to_string(after) +
                                ") leaves nothing of axis " +
                                std::to_string(axis) + " of " + in.str(),
                            {a.ranges[1]});
           if (start > 0 || end < dim) {
             type.shape[axis] = end - start;
             operand = s.emit("slice", {operand}, type,
                              {{"axis", axis},
                               {"start", start},
                               {"end", end},
                               {"step", int64_t(1)}},
                              a.loc);
           }
           int64_t kept = type.shape[axis];
           int64_t head = std::max<int64_t>(before, 0);
           int64_t tail = std::max<int64_t>(after, 0);
           if (head > 0 || tail > 0) {
             type.shape[axis] = head + kept + tail;
             operand = s.emit("slice_grad", {operand}, type,
                              {{"axis", axis},
                               {"start", head},
                               {"end", head + kept},
                               {"step", int64_t(1)}},
                              a.loc);
           }
         }
         return operand;
       };
       auto placed = place(*t);
       if (!placed)
         return Val::error();
       if (*value == 0.0)
         return tensor(*placed);
       // The border filled with `value` through the same placement of ones:
       // x's entries stay exact (x + value * 0), the border is 0 + value * 1.
       auto ones = place(s.splat(1.0, in, a.loc));
       Val border = s.binary(BinaryOp::Sub, Val::ofFloat(1.0), tensor(*ones),
                             a.loc, a.range, a.range);
       Val fill = s.binary(BinaryOp::Mul, border, Val::ofFloat(*value), a.loc,
                           a.range, a.range);
       return s.binary(BinaryOp::Add, tensor(*placed), fill, a.loc, a.range,
                       a.range);
     }},
    {"concat",
     {"tensors", "axis"},
     1,
     [](Sema &s, BoundArgs &a) -> Val {
       const Val &list = a.values[0];
       if (list.kind != Val::Kind::List || list.list.empty())
         return s.error(a.ranges[0].Start,
                        "concat takes a non-empty list of tensors, [a, b, ...]",
                        {a.ranges[0]});
       std::vector<int> operands;
       std::vector<shape::Shape> shapes;
       for (const Val &v : list.list) {
         auto t = s.asTensor(v, a.ranges[0], "each entry of concat");
         if (!t)
           return Val::error();
         if (s.typeOf(*t).dtype !=
             s.typeOf(operands.empty() ? *t : operands[0]).dtype)
           return s.error(a.ranges[0].Start,
                          "concat needs tensors of one element type",
                          {a.ranges[0]});
         operands.push_back(*t);
         shapes.push_back(s.typeOf(*t).shape);
       }
       auto axis = a.intOr(1, 0, "axis");
       if (!axis)
         return Val::error();
       shape::ShapeResult r = shape::concat(shapes, *axis);
       if (!check(s, a, r, "concat"))
         return Val::error();
       int64_t n = *shape::normalizeAxis(*axis, shapes[0].size());
       return tensor(s.emit("concat", operands,
                            {s.typeOf(operands[0]).dtype, r.shape},
                            {{"axis", n}}, a.loc));
     }},
    {"where",
     {"condition", "on_true", "on_false"},
     3,
     [](Sema &s, BoundArgs &a) -> Val {
       // A compile-time condition chooses a compile-time value (a stride
       // that depends on a repeat's index).
       if (a.values[0].kind == Val::Kind::Bool)
         return a.values[0].b ? a.values[1] : a.values[2];
       auto c = a.asTensor(0, "the condition of where");
       if (!c)
         return Val::error();
       if (s.typeOf(*c).dtype != ElementType::I1)
         return s.error(a.ranges[0].Start,
                        "the condition of where must be a mask (such as "
                        "causal_mask(n)), not " +
                            s.typeOf(*c).str(),
                        {a.ranges[0]});
       const Val &x = a.values[1], &y = a.values[2];
       if (!x.isTensor() && !y.isTensor())
         return s.error(a.loc, "where needs at least one tensor value",
                        {a.range});
       if (!(x.isTensor() || x.isNumber()) || !(y.isTensor() || y.isNumber()))
         return s.error(a.loc, "where chooses between tensors or numbers",
                        {a.range});
       ElementType dtype = s.typeOf(x.isTensor() ? x.tensor : y.tensor).dtype;
       if (x.isTensor() && y.isTensor() &&
           s.typeOf(x.tensor).dtype != s.typeOf(y.tensor).dtype)
         return s.error(a.loc, "where needs values of one element type",
                        {a.range});
       shape::Shape out = s.typeOf(*c).shape;
       for (const Val *v : {&x, &y}) {
         if (!v->isTensor())
           continue;
         shape::ShapeResult r =
             shape::broadcast(out, s.typeOf(v->tensor).shape);
         if (!check(s, a, r,
                    "where over " + s.typeOf(*c).str() + " and " +
                        s.typeOf(v->tensor).str()))
           return Val::error();
         out = r.shape;
       }
       auto operand = [&](const Val &v) {
         return v.isTensor() ? s.broadcastTo(v.tensor, out, a.loc)
                             : s.splat(v.number(), {dtype, out}, a.loc);
       };
       int cond = s.broadcastTo(*c, out, a.loc);
       int on = operand(x), off = operand(y);
       return tensor(s.emit("where", {cond, on, off}, {dtype, out}, {}, a.loc));
     }},
    {"causal_mask",
     {"rows", "cols"},
     1,
     [](Sema &s, BoundArgs &a) -> Val {
       auto rows = a.asInt(0, "rows");
       if (!rows)
         return Val::error();
       auto cols = a.intOr(1, *rows, "cols");
       if (!cols)
         return Val::error();
       if (*rows < 1 || *cols < 1 || !shape::numElements({*rows, *cols}))
         return s.error(a.loc, "the mask must have a positive size", {a.range});
       return tensor(s.emit("causal_mask", {},
                            {ElementType::I1, {*rows, *cols}}, {}, a.loc));
     }},
    {"conv2d", {"x", "weight", "stride", "padding"}, 2, convolution},
    {"upsample", {"x", "scale", "mode", "align_corners", "size"}, 1, upsample},
    {"scan",
     {"cell", "xs", "state", "args", "axis", "reverse"},
     3,
     scanBuiltin},
    {"conv_transpose2d",
     {"x", "weight", "stride", "padding", "output_padding"},
     2,
     convolution},
    {"max_pool2d", {"x", "kernel", "stride", "padding"}, 2, pool},
    {"avg_pool2d", {"x", "kernel", "stride", "padding"}, 2, pool},
    {"dropout",
     {"x", "p"},
     1,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asFloatTensor(0, "the input of dropout");
       auto p = dropProbability(s, a, "dropout");
       if (!t || !p)
         return Val::error();
       // Evaluation runs without dropout, as torch's model.eval().
       if (*p == 0 || s.evaluating())
         return tensor(*t);
       return tensor(s.emit("dropout", {*t}, s.typeOf(*t),
                            {{"p", *p}, {"seed", s.nextDropoutSeed()}}, a.loc));
     }},
    {"drop_path",
     {"x", "p"},
     1,
     [](Sema &s, BoundArgs &a) -> Val {
       // Stochastic depth, as timm's drop_path: each example's x is zeroed
       // with probability p, the others scaled by 1 / (1 - p). The mask is
       // a dropout of ones [batch, 1, ...] (one seed-drawn number per
       // example, nothing stored), broadcast over the example.
       auto t = a.asFloatTensor(0, "the input of drop_path");
       auto p = dropProbability(s, a, "drop_path");
       if (!t || !p)
         return Val::error();
       TensorType in = s.typeOf(*t);
       if (in.shape.empty())
         return s.error(a.ranges[0].Start,
                        "drop_path needs a batch axis first, not " + in.str(),
                        {a.ranges[0]});
       if (*p == 0 || s.evaluating())
         return tensor(*t);
       TensorType perExample = in;
       std::fill(perExample.shape.begin() + 1, perExample.shape.end(), 1);
       int keep =
           s.emit("dropout", {s.splat(1.0, perExample, a.loc)}, perExample,
                  {{"p", *p}, {"seed", s.nextDropoutSeed()}}, a.loc);
       return s.binary(BinaryOp::Mul, tensor(*t), tensor(keep), a.loc,
                       a.ranges[0], a.range);
     }},
    {"attention",
     {"q", "k", "v", "mask", "causal", "dropout", "scale"},
     3,
     [](Sema &s, BoundArgs &a) -> Val {
       // torch.nn.functional.scaled_dot_product_attention, fused: the
       // probabilities are never kept (lang/ops/attention/).
       auto q = a.asFloatTensor(0, "the queries of attention");
       auto k = a.asFloatTensor(1, "the keys of attention");
       auto v = a.asFloatTensor(2, "the values of attention");
       if (!q || !k || !v)
         return Val::error();
       TensorType qt = s.typeOf(*q), kt = s.typeOf(*k), vt = s.typeOf(*v);
       if (kt.dtype != qt.dtype || vt.dtype != qt.dtype)
         return s.error(a.loc,
                        "attention needs queries, keys and values of one "
                        "element type, not " +
                            qt.str() + ", " + kt.str() + " and " + vt.str(),
                        {a.range});
       std::vector<int> operands{*q, *k, *v};
       std::optional<shape::Shape> maskShape;
       if (a.has(3)) {
         auto m = a.asTensor(3, "the mask of attention");
         if (!m)
           return Val::error();
         TensorType mt = s.typeOf(*m);
         if (mt.dtype != ElementType::I1 && mt.dtype != qt.dtype)
           return s.error(
               a.ranges[3].Start,
               "the mask of attention must be a boolean mask or added "
               "scores of the queries' type, not " +
                   mt.str(),
               {a.ranges[3]});
         operands.push_back(*m);
         maskShape = mt.shape;
       }
       auto causal = a.boolOr(4, false, "causal");
       auto p = a.numberOr(5, 0.0, "dropout");
       if (!causal || !p)
         return Val::error();
       if (!(*p >= 0 && *p < 1))
         return s.error(a.ranges[5].Start, "dropout must be in [0, 1)",
                        {a.ranges[5]});
       if (s.evaluating())
         *p = 0;
       shape::ShapeResult r = shape::attention(
           qt.shape, kt.shape, vt.shape, maskShape ? &*maskShape : nullptr);
       if (!check(s, a, r,
                  "attend with queries " + qt.str() + ", keys " + kt.str() +
                      " and values " + vt.str()))
         return Val::error();
       auto scale =
           a.numberOr(6, 1.0 / std::sqrt(double(qt.shape.back())), "scale");
       if (!scale)
         return Val::error();
       if (!(std::isfinite(*scale) && *scale != 0))
         return s.error(a.ranges[6].Start, "scale must be finite and nonzero",
                        {a.ranges[6]});
       return tensor(s.emit("attention", operands, {qt.dtype, r.shape},
                            {{"causal", *causal},
                             {"scale", *scale},
                             {"dropout_p", *p},
                             // Without dropout no seed is drawn, so the
                             // seeds of later dropouts stay as they were.
                             {"seed", *p > 0 ? s.nextDropoutSeed() : 0}},
                            a.loc));
     }},
    {"cross_entropy",
     {"logits", "targets", "ignore_index", "label_smoothing"},
     2,
     loss},
    {"mse", {"prediction", "target"}, 2, loss},
    {"cast",
     {"x", "dtype"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asTensor(0, "the input of cast");
       auto d = a.asDType(1, "the target of cast");
       if (!t || !d)
         return Val::error();
       TensorType in = s.typeOf(*t);
       return tensor(s.emit("cast", {*t}, {*d, in.shape}, {}, a.loc));
     }},
    {"assert",
     {"condition", "message"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       auto cond = a.asBool(0, "the condition of assert");
       if (!cond)
         return Val::error();
       if (a.values[1].kind != Val::Kind::String)
         return s.error(a.ranges[1].Start,
                        "the message of assert must be a string",
                        {a.ranges[1]});
       if (!*cond)
         return s.error(a.loc, a.values[1].s, {a.ranges[0]});
       return Val::ofBool(true);
     }},
    {"size",
     {"x", "axis"},
     2,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asTensor(0, "the input of size");
       auto axis = a.asInt(1, "axis");
       if (!t || !axis)
         return Val::error();
       const TensorType &in = s.typeOf(*t);
       auto n = axisOf(s, *axis, in, a.ranges[1]);
       if (!n)
         return Val::error();
       return Val::ofInt(in.shape[*n]);
     }},
    {"rank",
     {"x"},
     1,
     [](Sema &s, BoundArgs &a) -> Val {
       auto t = a.asTensor(0, "the input of rank");
       if (!t)
         return Val::error();
       return Val::ofInt(int64_t(s.typeOf(*t).shape.size()));
     }},
};

} // namespace

const std::vector<Builtin> &mnemo::sema::builtinTable() { return kBuiltins; }

const Builtin *mnemo::sema::findBuiltin(llvm::StringRef name) {
  for (const Builtin &b : kBuiltins)
    if (name == b.name)
      return &b;
  return nullptr;
}
