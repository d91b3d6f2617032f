//===- GradientCheckTest.cpp - Every gradient rule against finite differences
//-===//
//
// For each differentiable op: a function loss(x...) = sum(op(x...) * R) with
// a fixed random R, differentiated by the same reverse-mode code the
// autodiff pass uses, and compared with central finite differences, all in
// f64 (the interpreter's exact mode). A second test fails when an op has
// neither a gradient rule with a check here nor the NoGradient trait.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/Interpreter.h"
#include "passes/Backward.h"
#include "runtime/Init.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <set>

using namespace mlir;
using namespace mnemo;

namespace {

/// How an input is drawn: normal, positive (log, sqrt), away from zero
/// (kinks of relu, division), integer indices in [0, range), or a mask.
enum class Draw { Normal, Positive, AwayFromZero, Indices, Mask };

struct Input {
  std::string type; // "f32[3,4]"
  Draw draw = Draw::Normal;
  int64_t range = 0;
};

using OpBuilderFn = std::function<Value(OpBuilder &, Location, ValueRange)>;

struct GradientCase {
  std::string name; // the test's name: "matmul_transpose_rhs"
  std::string op;   // the op it checks: "mnemo.matmul"
  std::vector<Input> inputs;
  OpBuilderFn build;
};

// Failures name the case, not its bytes.
void PrintTo(const GradientCase &c, std::ostream *os) { *os << c.name; }

RankedTensorType parseType(MLIRContext &ctx, const std::string &spec) {
  auto open = spec.find('[');
  std::string dtype = spec.substr(0, open);
  SmallVector<int64_t> shape;
  std::string dims = spec.substr(open + 1, spec.size() - open - 2);
  for (size_t i = 0; i < dims.size();) {
    size_t comma = dims.find(',', i);
    shape.push_back(std::stoll(dims.substr(i, comma - i)));
    i = comma == std::string::npos ? dims.size() : comma + 1;
  }
  Builder b(&ctx);
  Type element = dtype == "i32"   ? Type(b.getI32Type())
                 : dtype == "i1"  ? Type(b.getI1Type())
                 : dtype == "f16" ? Type(b.getF16Type())
                                  : Type(b.getF32Type());
  return RankedTensorType::get(shape, element);
}

RankedTensorType like(Value v, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(
      shape, llvm::cast<RankedTensorType>(v.getType()).getElementType());
}

Value unary(OpBuilder &b, Location loc, ValueRange in, StringRef op) {
  OperationState state(loc, op);
  state.addOperands(in[0]);
  state.addTypes(in[0].getType());
  return b.create(state)->getResult(0);
}

Value binary(OpBuilder &b, Location loc, ValueRange in, StringRef op) {
  OperationState state(loc, op);
  state.addOperands({in[0], in[1]});
  state.addTypes(in[0].getType());
  return b.create(state)->getResult(0);
}

std::vector<GradientCase> allCases() {
  std::vector<GradientCase> cases;
  auto add = [&](std::string name, std::string op, std::vector<Input> inputs,
                 OpBuilderFn fn) {
    cases.push_back(
        {std::move(name), std::move(op), std::move(inputs), std::move(fn)});
  };
  Input m34{"f32[3,4]"};
  for (const char *op : {"add", "sub", "mul"})
    add(op, std::string("mnemo.") + op, {m34, m34},
        [op](OpBuilder &b, Location l, ValueRange in) {
          return binary(b, l, in, std::string("mnemo.") + op);
        });
  add("div", "mnemo.div", {m34, {"f32[3,4]", Draw::AwayFromZero}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return binary(b, l, in, "mnemo.div");
      });
  struct Unary {
    const char *op;
    Draw draw;
  };
  for (Unary u :
       {Unary{"neg", Draw::Normal}, Unary{"exp", Draw::Normal},
        Unary{"log", Draw::Positive}, Unary{"sqrt", Draw::Positive},
        Unary{"rsqrt", Draw::Positive}, Unary{"tanh", Draw::Normal},
        Unary{"sigmoid", Draw::Normal}, Unary{"relu", Draw::AwayFromZero},
        Unary{"silu", Draw::Normal}, Unary{"gelu", Draw::Normal},
        Unary{"softplus", Draw::Normal}, Unary{"sin", Draw::Normal},
        Unary{"cos", Draw::Normal}})
    add(u.op, std::string("mnemo.") + u.op, {{"f32[3,4]", u.draw}},
        [op = u.op](OpBuilder &b, Location l, ValueRange in) {
          return unary(b, l, in, std::string("mnemo.") + op);
        });
  add("gelu_tanh", "mnemo.gelu", {m34},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<GeluOp>(l, in[0].getType(), in[0], true);
      });
  // Softplus with PyTorch's other knobs: beta scales, and past the
  // threshold (beta x > 2 here, so some of the normal draws) it is x.
  add("softplus_beta", "mnemo.softplus", {m34},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<SoftplusOp>(l, in[0].getType(), in[0],
                                    b.getF64FloatAttr(2.0),
                                    b.getF64FloatAttr(2.0));
      });
  // logsumexp over the last axis, and over a middle one kept as size 1.
  add("logsumexp", "mnemo.logsumexp", {m34},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<LogSumExpOp>(l, like(in[0], {3}), in[0], -1, false);
      });
  add("logsumexp_middle_keep", "mnemo.logsumexp", {{"f32[2,3,4]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<LogSumExpOp>(l, like(in[0], {2, 1, 4}), in[0], 1, true);
      });
  for (double c : {2.0, 3.0, 0.5})
    add("pow_" + std::to_string(int(c * 10)), "mnemo.pow",
        {{"f32[3,4]", Draw::Positive}},
        [c](OpBuilder &b, Location l, ValueRange in) {
          return b.create<PowOp>(l, in[0].getType(), in[0],
                                 b.getF64FloatAttr(c));
        });
  add("cast", "mnemo.cast", {m34}, [](OpBuilder &b, Location l, ValueRange in) {
    Value h =
        b.create<CastOp>(l, like(in[0], {3, 4}).clone(b.getF16Type()), in[0]);
    return b.create<CastOp>(l, in[0].getType(), h);
  });
  add("where", "mnemo.where", {{"i1[3,4]", Draw::Mask}, m34, m34},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<WhereOp>(l, in[1].getType(), in[0], in[1], in[2]);
      });
  add("dropout", "mnemo.dropout", {m34},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<DropoutOp>(l, in[0].getType(), in[0],
                                   b.getF64FloatAttr(0.3),
                                   b.getI64IntegerAttr(7));
      });
  // Contractions, with every transpose flag.
  struct MatmulCase {
    const char *name, *lhs, *rhs;
    bool ta, tb;
    std::vector<int64_t> out;
  };
  for (MatmulCase c :
       {MatmulCase{"matmul", "f32[3,4]", "f32[4,5]", false, false, {3, 5}},
        MatmulCase{
            "matmul_rows", "f32[2,3,4]", "f32[5,4]", false, true, {2, 3, 5}},
        MatmulCase{"matmul_transpose_lhs",
                   "f32[4,3]",
                   "f32[4,5]",
                   true,
                   false,
                   {3, 5}},
        MatmulCase{"matmul_rows_transpose_lhs",
                   "f32[2,4,3]",
                   "f32[5,4]",
                   true,
                   true,
                   {2, 3, 5}}})
    add(c.name, "mnemo.matmul", {{c.lhs}, {c.rhs}},
        [c](OpBuilder &b, Location l, ValueRange in) {
          return b.create<MatmulOp>(l, like(in[0], c.out), in[0], in[1], c.ta,
                                    c.tb);
        });
  for (int flags = 0; flags < 4; ++flags) {
    bool ta = flags & 1, tb = flags & 2;
    add("batch_matmul_" + std::to_string(flags), "mnemo.batch_matmul",
        {{ta ? "f32[2,4,3]" : "f32[2,3,4]"},
         {tb ? "f32[2,5,4]" : "f32[2,4,5]"}},
        [ta, tb](OpBuilder &b, Location l, ValueRange in) {
          return b.create<BatchMatmulOp>(l, like(in[0], {2, 3, 5}), in[0],
                                         in[1], ta, tb);
        });
  }
  add("conv2d", "mnemo.conv2d", {{"f32[2,3,5,5]"}, {"f32[4,3,3,3]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<Conv2DOp>(l, like(in[0], {2, 4, 5, 5}), in[0], in[1],
                                  ArrayRef<int64_t>{1, 1},
                                  ArrayRef<int64_t>{1, 1});
      });
  // conv_transpose2d: stride 2, padding 1, output_padding 1 (3 -> 6).
  add("conv_transpose2d", "mnemo.conv2d_input_grad",
      {{"f32[2,3,3,3]"}, {"f32[3,2,3,3]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<Conv2DInputGradOp>(l, like(in[0], {2, 2, 6, 6}), in[0],
                                           in[1], ArrayRef<int64_t>{2, 2},
                                           ArrayRef<int64_t>{1, 1});
      });
  add("conv2d_strided", "mnemo.conv2d", {{"f32[1,2,7,7]"}, {"f32[3,2,3,3]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<Conv2DOp>(l, like(in[0], {1, 3, 3, 3}), in[0], in[1],
                                  ArrayRef<int64_t>{2, 2},
                                  ArrayRef<int64_t>{0, 0});
      });
  add("max_pool2d", "mnemo.max_pool2d", {{"f32[1,2,6,6]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<MaxPool2DOp>(
            l, like(in[0], {1, 2, 3, 3}), in[0], ArrayRef<int64_t>{2, 2},
            ArrayRef<int64_t>{2, 2}, ArrayRef<int64_t>{0, 0});
      });
  add("avg_pool2d", "mnemo.avg_pool2d", {{"f32[1,2,5,5]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<AvgPool2DOp>(
            l, like(in[0], {1, 2, 3, 3}), in[0], ArrayRef<int64_t>{3, 3},
            ArrayRef<int64_t>{2, 2}, ArrayRef<int64_t>{1, 1});
      });
  // Reductions and normalizations.
  add("sum", "mnemo.sum", {{"f32[2,3,4]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<SumOp>(l, like(in[0], {2, 4}), in[0],
                               ArrayRef<int64_t>{1}, false);
      });
  add("mean_keep", "mnemo.mean", {{"f32[2,3,4]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<MeanOp>(l, like(in[0], {1, 3, 1}), in[0],
                                ArrayRef<int64_t>{0, 2}, true);
      });
  add("max", "mnemo.max", {{"f32[3,5]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<MaxOp>(l, like(in[0], {3}), in[0], ArrayRef<int64_t>{1},
                               false);
      });
  add("softmax", "mnemo.softmax", {{"f32[3,5]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<SoftmaxOp>(l, in[0].getType(), in[0], -1);
      });
  add("softmax_axis0", "mnemo.softmax", {{"f32[3,5]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<SoftmaxOp>(l, in[0].getType(), in[0], 0);
      });
  add("log_softmax", "mnemo.log_softmax", {{"f32[3,5]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<LogSoftmaxOp>(l, in[0].getType(), in[0], 1);
      });
  add("layernorm", "mnemo.layernorm", {{"f32[3,5]"}, {"f32[5]"}, {"f32[5]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<LayerNormOp>(l, in[0].getType(), in[0], in[1], in[2],
                                     b.getF64FloatAttr(1e-5));
      });
  add("rmsnorm", "mnemo.rmsnorm", {{"f32[3,5]"}, {"f32[5]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<RmsNormOp>(l, in[0].getType(), in[0], in[1],
                                   b.getF64FloatAttr(1e-6));
      });
  add("batch_norm", "mnemo.batch_norm",
      {{"f32[4,3,2,2]"}, {"f32[3]"}, {"f32[3]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        auto stats = like(in[1], {3});
        return b
            .create<BatchNormOp>(l, in[0].getType(), stats, stats, in[0], in[1],
                                 in[2], b.getF64FloatAttr(1e-5))
            .getResult();
      });
  // A loss that reads the statistics too (their gradients reach the input).
  add("batch_norm_statistics", "mnemo.batch_norm",
      {{"f32[4,3,2]"}, {"f32[3]"}, {"f32[3]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        auto stats = like(in[1], {3});
        auto op = b.create<BatchNormOp>(l, in[0].getType(), stats, stats, in[0],
                                        in[1], in[2], b.getF64FloatAttr(1e-5));
        Value meanTimesVar =
            b.create<MulOp>(l, stats, op.getMean(), op.getVariance());
        return b
            .create<AddOp>(l, stats, meanTimesVar,
                           b.create<SumOp>(l, stats, op.getResult(),
                                           ArrayRef<int64_t>{0, 2},
                                           /*keep_dims=*/false))
            .getResult();
      });
  // Losses.
  add("cross_entropy", "mnemo.cross_entropy",
      {{"f32[2,3,6]"}, {"i32[2,3]", Draw::Indices, 6}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<CrossEntropyOp>(l, like(in[0], {}), in[0], in[1],
                                        b.getI64IntegerAttr(-100),
                                        b.getF64FloatAttr(0.0));
      });
  // ignore_index is a class here (2 of 6), so that the twenty random
  // targets hit it and the ignored rows' zero gradient is checked too.
  add("cross_entropy_ignore_smoothing", "mnemo.cross_entropy",
      {{"f32[4,5,6]"}, {"i32[4,5]", Draw::Indices, 6}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<CrossEntropyOp>(l, like(in[0], {}), in[0], in[1],
                                        b.getI64IntegerAttr(2),
                                        b.getF64FloatAttr(0.1));
      });
  // The fused classifier loss, its rows in chunks of 3 (a partial last
  // chunk), the weight [classes, dim] (tied) or [dim, classes].
  auto classifier = [](OpBuilder &b, Location l, ValueRange in,
                       bool transposeWeight, int64_t chunkRows,
                       int64_t ignoreIndex, double smoothing) {
    auto targets = llvm::cast<RankedTensorType>(in[2].getType());
    auto op = b.create<LinearCrossEntropyOp>(
        l,
        TypeRange{RankedTensorType::get({}, b.getF32Type()),
                  RankedTensorType::get(targets.getShape(), b.getF32Type())},
        in[0], in[1], in[2], in.size() > 3 ? in[3] : Value(),
        b.getBoolAttr(transposeWeight), b.getI64IntegerAttr(chunkRows),
        b.getI64IntegerAttr(ignoreIndex), b.getF64FloatAttr(smoothing));
    return op.getResult();
  };
  add("linear_cross_entropy", "mnemo.linear_cross_entropy",
      {{"f32[2,4,5]"}, {"f32[7,5]"}, {"i32[2,4]", Draw::Indices, 7}},
      [=](OpBuilder &b, Location l, ValueRange in) {
        return classifier(b, l, in, true, 3, -100, 0.0);
      });
  add("linear_cross_entropy_ignore_smoothing", "mnemo.linear_cross_entropy",
      {{"f32[3,4,5]"}, {"f32[5,6]"}, {"i32[3,4]", Draw::Indices, 6}},
      [=](OpBuilder &b, Location l, ValueRange in) {
        return classifier(b, l, in, false, 5, 1, 0.2);
      });
  // With a bias (BERT's decoder, a Linear head): its gradient is the
  // logits' summed over the rows, across the chunks.
  add("linear_cross_entropy_bias", "mnemo.linear_cross_entropy",
      {{"f32[2,4,5]"},
       {"f32[7,5]"},
       {"i32[2,4]", Draw::Indices, 7},
       {"f32[7]"}},
      [=](OpBuilder &b, Location l, ValueRange in) {
        return classifier(b, l, in, true, 3, -100, 0.0);
      });
  add("linear_cross_entropy_bias_ignore_smoothing",
      "mnemo.linear_cross_entropy",
      {{"f32[3,4,5]"},
       {"f32[5,6]"},
       {"i32[3,4]", Draw::Indices, 6},
       {"f32[6]"}},
      [=](OpBuilder &b, Location l, ValueRange in) {
        return classifier(b, l, in, false, 5, 1, 0.2);
      });
  add("mse", "mnemo.mse", {m34, m34},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<MseOp>(l, like(in[0], {}), in[0], in[1]);
      });
  // Data movement.
  add("embedding", "mnemo.embedding",
      {{"f32[6,3]"}, {"i32[2,5]", Draw::Indices, 6}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<EmbeddingOp>(l, like(in[0], {2, 5, 3}), in[0], in[1]);
      });
  add("reshape", "mnemo.reshape", {{"f32[2,3,4]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<ReshapeOp>(l, like(in[0], {6, 4}), in[0]);
      });
  add("transpose", "mnemo.transpose", {{"f32[2,3,4]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<TransposeOp>(l, like(in[0], {4, 2, 3}), in[0],
                                     ArrayRef<int64_t>{2, 0, 1});
      });
  add("broadcast", "mnemo.broadcast", {{"f32[3,1]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<BroadcastOp>(l, like(in[0], {2, 3, 4}), in[0]);
      });
  add("slice", "mnemo.slice", {{"f32[3,6]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<SliceOp>(l, like(in[0], {3, 2}), in[0], 1, 1, 5, 2);
      });
  // Slices that tile their input (a scan's steps, an LSTM's gates): the
  // backward joins their gradients with one concat (passes/Backward.cpp).
  add("slices_tiling", "mnemo.slice", {{"f32[3,6]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        Type piece = like(in[0], {3, 2});
        Value s2 = b.create<SliceOp>(l, piece, in[0], 1, 4, 6, 1);
        Value s0 = b.create<SliceOp>(l, piece, in[0], 1, 0, 2, 1);
        Value s1 = b.create<SliceOp>(l, piece, in[0], 1, 2, 4, 1);
        Value t0 = b.create<TanhOp>(l, piece, s0);
        Value p = b.create<MulOp>(l, piece, t0, s1);
        Value q = b.create<MulOp>(l, piece, s2, s2);
        return b.create<AddOp>(l, piece, p, q).getResult();
      });
  // pad's forward: [3,2] placed at columns 1 and 3 of zeros [3,6].
  add("slice_grad", "mnemo.slice_grad", {{"f32[3,2]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<SliceGradOp>(l, like(in[0], {3, 6}), in[0], 1, 1, 5, 2);
      });
  // Fused attention (the gradient rule is one attention_grad op, whose
  // interpreter model is the textbook softmax backward): plain, causal with
  // grouped key/value heads, an additive mask with a hidden key, a boolean
  // mask that hides a whole row (zeros, no gradient), and dropout.
  auto attention = [](OpBuilder &b, Location l, ValueRange in, Value mask,
                      bool causal, double scale, double dropout) {
    auto q = llvm::cast<RankedTensorType>(in[0].getType());
    auto v = llvm::cast<RankedTensorType>(in[2].getType());
    SmallVector<int64_t> out(q.getShape()), rows(q.getShape());
    out.back() = v.getShape().back();
    rows.pop_back();
    auto op = b.create<AttentionOp>(
        l,
        TypeRange{RankedTensorType::get(out, q.getElementType()),
                  RankedTensorType::get(rows, b.getF32Type())},
        in[0], in[1], in[2], mask, b.getBoolAttr(causal),
        b.getF64FloatAttr(scale), b.getF64FloatAttr(dropout),
        b.getI64IntegerAttr(7));
    return op.getResult();
  };
  add("attention", "mnemo.attention",
      {{"f32[1,2,3,4]"}, {"f32[1,2,5,4]"}, {"f32[1,2,5,3]"}},
      [=](OpBuilder &b, Location l, ValueRange in) {
        return attention(b, l, in, Value(), false, 0.5, 0.0);
      });
  add("attention_causal_grouped", "mnemo.attention",
      {{"f32[2,4,4,3]"}, {"f32[2,2,4,3]"}, {"f32[2,2,4,2]"}},
      [=](OpBuilder &b, Location l, ValueRange in) {
        return attention(b, l, in, Value(), true, 0.7, 0.0);
      });
  add("attention_additive_mask", "mnemo.attention",
      {{"f32[1,2,3,4]"}, {"f32[1,2,5,4]"}, {"f32[1,2,5,3]"}},
      [=](OpBuilder &b, Location l, ValueRange in) {
        auto type = RankedTensorType::get({3, 5}, b.getF32Type());
        float hidden = -std::numeric_limits<float>::infinity();
        SmallVector<float> bias{0.5f,  -1.0f, 0.0f,   hidden, 0.25f,
                                -0.5f, 0.0f,  1.0f,   0.3f,   -2.0f,
                                0.0f,  0.1f,  hidden, -0.7f,  0.2f};
        Value mask = b.create<ConstantOp>(
            l, DenseElementsAttr::get(type, ArrayRef<float>(bias)));
        return attention(b, l, in, mask, false, 0.5, 0.0);
      });
  add("attention_boolean_mask", "mnemo.attention",
      {{"f32[2,2,3,4]"}, {"f32[2,2,5,4]"}, {"f32[2,2,5,3]"}},
      [=](OpBuilder &b, Location l, ValueRange in) {
        auto type = RankedTensorType::get({2, 1, 3, 5}, b.getI1Type());
        SmallVector<bool> keep{1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
                               0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 1};
        Value mask = b.create<ConstantOp>(
            l, DenseElementsAttr::get(type, ArrayRef<bool>(keep)));
        return attention(b, l, in, mask, true, 0.5, 0.0);
      });
  add("attention_dropout", "mnemo.attention",
      {{"f32[1,2,4,3]"}, {"f32[1,1,6,3]"}, {"f32[1,1,6,2]"}},
      [=](OpBuilder &b, Location l, ValueRange in) {
        return attention(b, l, in, Value(), false, 0.6, 0.3);
      });
  add("concat", "mnemo.concat", {{"f32[2,3]"}, {"f32[2,2]"}},
      [](OpBuilder &b, Location l, ValueRange in) {
        return b.create<ConcatOp>(l, like(in[0], {2, 5}),
                                  ValueRange{in[0], in[1]}, 1);
      });
  return cases;
}

class GradientCheck : public ::testing::TestWithParam<GradientCase> {
protected:
  void SetUp() override {
    context.getOrLoadDialect<MnemoDialect>();
    context.getOrLoadDialect<func::FuncDialect>();
  }
  MLIRContext context;
};

/// Builds `name(inputs...) -> loss` or, with `withGradients`, the loss and
/// the gradient of every float input: loss = sum(op(inputs) * R).
func::FuncOp buildFunction(ModuleOp module, const GradientCase &c,
                           bool withGradients, runtime::Rng &weights) {
  MLIRContext &ctx = *module.getContext();
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  SmallVector<Type> inputTypes;
  for (const Input &in : c.inputs)
    inputTypes.push_back(parseType(ctx, in.type));
  b.setInsertionPointToEnd(module.getBody());
  auto f = b.create<func::FuncOp>(loc, withGradients ? "grad" : "loss",
                                  b.getFunctionType(inputTypes, {}));
  Block *body = f.addEntryBlock();
  b.setInsertionPointToEnd(body);
  Value y = c.build(b, loc, body->getArguments());
  auto yType = llvm::cast<RankedTensorType>(y.getType());
  SmallVector<float> r;
  for (int64_t i = 0; i < yType.getNumElements(); ++i)
    r.push_back(float(weights.normal()));
  Value R = b.create<ConstantOp>(
      loc, DenseElementsAttr::get(yType, ArrayRef<float>(r)));
  Value weighted = b.create<MulOp>(loc, yType, y, R);
  SmallVector<int64_t> all;
  for (int64_t i = 0; i < yType.getRank(); ++i)
    all.push_back(i);
  auto scalar = RankedTensorType::get({}, yType.getElementType());
  Value loss = b.create<SumOp>(loc, scalar, weighted, all, false);
  SmallVector<Value> results{loss};
  if (withGradients) {
    SmallVector<Operation *> ops;
    for (Operation &o : *body)
      ops.push_back(&o);
    Value seed =
        b.create<ConstantOp>(loc, DenseElementsAttr::get(scalar, 1.0f));
    auto grads = buildBackward(b, ops, loss, seed);
    EXPECT_TRUE(succeeded(grads)) << "no gradient rule for " << c.op;
    if (failed(grads))
      return nullptr;
    for (BlockArgument arg : body->getArguments()) {
      if (!llvm::isa<FloatType>(
              llvm::cast<RankedTensorType>(arg.getType()).getElementType()))
        continue;
      Value g = grads->lookup(arg);
      EXPECT_TRUE(g) << c.op << " gave no gradient to a float operand";
      if (!g)
        return nullptr;
      results.push_back(g);
    }
  }
  b.create<func::ReturnOp>(loc, results);
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  f.setFunctionType(b.getFunctionType(inputTypes, resultTypes));
  return f;
}

TEST_P(GradientCheck, MatchesFiniteDifferences) {
  const GradientCase &c = GetParam();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  runtime::Rng weightsForLoss(11), weightsForGrad(11);
  func::FuncOp lossFn = buildFunction(*module, c, false, weightsForLoss);
  func::FuncOp gradFn = buildFunction(*module, c, true, weightsForGrad);
  ASSERT_TRUE(lossFn && gradFn);
  ASSERT_TRUE(succeeded(verify(*module))) << c.name;

  // Random inputs of the kinds the op needs.
  runtime::Rng rng(42);
  std::vector<Tensor> inputs;
  for (const Input &in : c.inputs) {
    RankedTensorType type = parseType(context, in.type);
    Tensor t(elementTypeOf(type), std::vector<int64_t>(type.getShape().begin(),
                                                       type.getShape().end()));
    for (double &x : t.data) {
      switch (in.draw) {
      case Draw::Normal:
        x = rng.normal();
        break;
      case Draw::Positive:
        x = 0.5 + 2.0 * rng.uniform();
        break;
      case Draw::AwayFromZero:
        x = (rng.uniform() < 0.5 ? -1 : 1) * (0.3 + rng.uniform());
        break;
      case Draw::Indices:
        x = double(int64_t(rng.uniform() * double(in.range)));
        break;
      case Draw::Mask:
        x = rng.uniform() < 0.5 ? 0 : 1;
        break;
      }
    }
    inputs.push_back(t);
  }

  Interpreter interpreter(
      InterpreterOptions{/*exact=*/true, /*dropoutStep=*/1});
  std::string error;
  auto analytic = interpreter.run(gradFn, inputs, error);
  ASSERT_TRUE(succeeded(analytic)) << error;

  unsigned gradIndex = 1;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!isFloat(inputs[k].type))
      continue;
    const Tensor &grad = (*analytic)[gradIndex++];
    for (int64_t i = 0; i < inputs[k].numElements(); ++i) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      double h = 1e-6 * std::max(1.0, std::fabs(inputs[k].data[i]));
      plus[k].data[i] += h;
      minus[k].data[i] -= h;
      auto lp = interpreter.run(lossFn, plus, error);
      auto lm = interpreter.run(lossFn, minus, error);
      ASSERT_TRUE(succeeded(lp) && succeeded(lm)) << error;
      double numeric = ((*lp)[0].data[0] - (*lm)[0].data[0]) / (2 * h);
      EXPECT_NEAR(grad.data[i], numeric, 1e-6 + 1e-5 * std::fabs(numeric))
          << c.name << ": operand " << k << ", element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryOp, GradientCheck, ::testing::ValuesIn(allCases()),
    [](const ::testing::TestParamInfo<GradientCase> &info) {
      return info.param.name;
    });

/// Ops whose gradient is a convention, not a derivative: fake_quant is a
/// step function (zero derivative almost everywhere); training uses the
/// straight-through estimator, checked against its definition below.
const std::set<std::string> kStraightThrough = {"mnemo.fake_quant"};

/// fake_quant's rule: the output's gradient where round(x / scale) + zp
/// lies in [quant_min, quant_max], 0 where the value was clipped; the
/// forward lands on the grid of the range's scale.
TEST(StraightThrough, FakeQuantPassesTheGradientInsideItsRange) {
  MLIRContext context;
  context.getOrLoadDialect<MnemoDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  auto x = RankedTensorType::get({2, 41}, b.getF32Type());
  auto range = RankedTensorType::get({2}, b.getF32Type());
  b.setInsertionPointToEnd(module->getBody());
  auto f = b.create<func::FuncOp>(
      loc, "f", b.getFunctionType({x, range, range, x}, {x, x}));
  Block *body = f.addEntryBlock();
  b.setInsertionPointToEnd(body);
  auto fake = b.create<FakeQuantOp>(
      loc, x, body->getArgument(0), body->getArgument(1), body->getArgument(2),
      b.getI64IntegerAttr(0), b.getI64IntegerAttr(-8), b.getI64IntegerAttr(7),
      b.getBoolAttr(true));
  SmallVector<Value> grads =
      llvm::cast<GradientOpInterface>(fake.getOperation())
          .buildGradient(b, {body->getArgument(3)});
  ASSERT_EQ(grads.size(), 3u);
  EXPECT_FALSE(grads[1] || grads[2]) << "the observed range gets no gradient";
  b.create<func::ReturnOp>(loc, ValueRange{fake.getResult(), grads[0]});
  ASSERT_TRUE(succeeded(verify(*module)));

  // Channel 0 observed [-1, 1], channel 1 [-0.5, 2]; x sweeps [-2, 2].
  Tensor in(ElementType::F32, {2, 41}), lo(ElementType::F32, {2}),
      hi(ElementType::F32, {2}), dy(ElementType::F32, {2, 41});
  lo.data = {-1.0, -0.5};
  hi.data = {1.0, 2.0};
  for (int64_t i = 0; i < 82; ++i) {
    in.data[i] = -2.0 + 0.1 * double(i % 41);
    dy.data[i] = 1.0 + double(i);
  }
  std::string error;
  auto out = Interpreter().run(f, {in, lo, hi, dy}, error);
  ASSERT_TRUE(succeeded(out)) << error;
  for (int64_t c = 0; c < 2; ++c) {
    // Symmetric int4: scale = max|range| / 7.5, zero point 0.
    float scale = float(std::max(-lo.data[c], hi.data[c])) / 7.5f;
    for (int64_t i = c * 41; i < (c + 1) * 41; ++i) {
      float q = std::nearbyint(float(in.data[i]) * (1.0f / scale));
      bool inside = q >= -8 && q <= 7;
      EXPECT_EQ((*out)[1].data[i], inside ? dy.data[i] : 0.0) << i;
      float clamped = std::min(7.0f, std::max(-8.0f, q));
      EXPECT_FLOAT_EQ(float((*out)[0].data[i]), clamped * scale) << i;
    }
  }
}

/// Every op either has a gradient rule checked above or is marked as one no
/// gradient flows through; adding an op without deciding fails here.
TEST(GradientRules, EveryOpHasARuleAndACheck) {
  MLIRContext context;
  context.getOrLoadDialect<MnemoDialect>();
  std::set<std::string> checked;
  for (const GradientCase &c : allCases())
    checked.insert(c.op);
  for (RegisteredOperationName op : context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "mnemo")
      continue;
    std::string name = op.getStringRef().str();
    bool hasRule = op.hasInterface<GradientOpInterface>();
    bool noGradient = op.hasTrait<NoGradient>();
    EXPECT_TRUE(hasRule || noGradient)
        << name << " has neither a gradient rule nor the NoGradient trait";
    EXPECT_FALSE(hasRule && noGradient)
        << name << " has both a gradient rule and NoGradient";
    if (hasRule)
      EXPECT_TRUE(checked.count(name) || kStraightThrough.count(name))
          << name << " has a gradient rule but no gradient check";
  }
}

} // namespace
