//===- SemaTest.cpp - Elaboration, shape inference and diagnostics --------===//

#include "FrontendTestUtil.h"

#include <gtest/gtest.h>

using namespace mnemo;
using namespace mnemo::test;

namespace {
bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

/// A model whose forward returns `expr`, with inputs a..d of the given types.
std::string model(const std::string &inputs, const std::string &expr) {
  return "import std.nn\nmodel T() {\n" + inputs +
         "\n  forward {\n    return " + expr + "\n  }\n}\n";
}

const GraphArg *findArg(const Graph &g, const std::string &name) {
  for (const GraphArg &a : g.args)
    if (a.name == name)
      return &a;
  return nullptr;
}
} // namespace

TEST(Sema, BroadcastingFollowsNumpy) {
  EXPECT_EQ(outputType(compile(
                model("input a: f32[4, 3]\n input b: f32[3]", "a + b"))),
            "f32[4,3]");
  EXPECT_EQ(outputType(compile(
                model("input a: f32[4, 1]\n input b: f32[1, 5]", "a * b"))),
            "f32[4,5]");
  EXPECT_EQ(outputType(compile(model("input a: f32[2, 3]", "1 - a / 2"))),
            "f32[2,3]");
}

TEST(Sema, BroadcastErrorNamesBothShapes) {
  Compiled c = compile(model("input a: f32[4, 3]\n input b: f32[5]", "a + b"));
  EXPECT_TRUE(contains(
      c.errors, "error: cannot add f32[4,3] and f32[5]: dimensions 3 and 5 "
                "(axis -1) do not broadcast"))
      << c.errors;
}

TEST(Sema, MatmulErrorNamesBothShapes) {
  Compiled c =
      compile(model("input x: f32[128, 784]\n input w: f32[512, 10]", "x @ w"));
  EXPECT_TRUE(contains(c.errors,
                       "test.mn:6:14: error: cannot matmul f32[128,784] by "
                       "f32[512,10]: inner dimensions 784 and 512 differ"))
      << c.errors;
}

TEST(Sema, MatmulShapes) {
  EXPECT_EQ(outputType(compile(model(
                "input a: f32[2, 3, 4, 5]\n input b: f32[5, 6]", "a @ b"))),
            "f32[2,3,4,6]");
  // Batch dimensions broadcast, as torch.matmul.
  EXPECT_EQ(outputType(compile(model(
                "input a: f32[2, 1, 4, 5]\n input b: f32[3, 5, 6]", "a @ b"))),
            "f32[2,3,4,6]");
  EXPECT_EQ(outputType(compile(model("input a: f32[8, 5]", "a @ a.T"))),
            "f32[8,8]");
}

TEST(Sema, DtypesMustAgree) {
  Compiled c = compile(model("input a: f32[4]\n input b: bf16[4]", "a + b"));
  EXPECT_TRUE(
      contains(c.errors, "cannot add f32[4] and bf16[4]: element types differ"))
      << c.errors;
  EXPECT_EQ(outputType(compile(model("input a: f32[4]\n input b: bf16[4]",
                                     "cast(a, bf16) + b"))),
            "bf16[4]");
}

TEST(Sema, ReductionsAndShapeOps) {
  EXPECT_EQ(
      outputType(compile(model("input a: f32[2, 3, 4]", "sum(a, axis = 1)"))),
      "f32[2,4]");
  EXPECT_EQ(
      outputType(compile(model("input a: f32[2, 3, 4]",
                               "mean(a, axis = [0, 2], keepdim = true)"))),
      "f32[1,3,1]");
  EXPECT_EQ(outputType(compile(model("input a: f32[2, 3, 4]", "max(a)"))),
            "f32[]");
  EXPECT_EQ(outputType(
                compile(model("input a: f32[2, 3, 4]", "reshape(a, [-1, 4])"))),
            "f32[6,4]");
  EXPECT_EQ(outputType(compile(
                model("input a: f32[2, 3, 4]", "permute(a, [2, 0, 1])"))),
            "f32[4,2,3]");
  EXPECT_EQ(
      outputType(compile(model("input a: f32[2, 3, 4]", "slice(a, -1, 1, 3)"))),
      "f32[2,3,2]");
  EXPECT_EQ(outputType(compile(model("input a: f32[2, 3]\n input b: f32[2, 5]",
                                     "concat([a, b], axis = 1)"))),
            "f32[2,8]");
  EXPECT_EQ(
      outputType(compile(model("input a: f32[2, 1, 28, 28]", "flatten(a)"))),
      "f32[2,784]");
}

TEST(Sema, ConvPoolAndAttentionPieces) {
  EXPECT_EQ(outputType(compile(
                model("input x: f32[8, 1, 28, 28]\n input w: f32[4, 1, 3, 3]",
                      "max_pool2d(conv2d(x, w, padding = 1), 2)"))),
            "f32[8,4,14,14]");
  EXPECT_EQ(
      outputType(compile(model("input s: f32[2, 4, 8, 8]",
                               "softmax(where(causal_mask(8), s, -inf))"))),
      "f32[2,4,8,8]");
}

TEST(Sema, LayersNameTheirParametersByPath) {
  Compiled c = compile(R"(
import std.nn
model G(layers = 3, dim = 16) {
  input x: f32[2, 8, dim]
  let blocks = repeat layers { TransformerBlock(dim, 2) }
  forward { return blocks(x) }
}
)");
  ASSERT_TRUE(c.graph) << c.errors;
  EXPECT_EQ(outputType(c), "f32[2,8,16]");
  ASSERT_TRUE(findArg(*c.graph, "blocks.2.attn.wq.weight"));
  EXPECT_EQ(c.graph->values[findArg(*c.graph, "blocks.2.attn.wq.weight")->value]
                .str(),
            "f32[16,16]");
  EXPECT_TRUE(findArg(*c.graph, "blocks.0.mlp.fc.bias"));
  EXPECT_FALSE(findArg(*c.graph, "blocks.3.mlp.fc.bias"));
  // Each use creates its own parameters: 3 blocks x 16 tensors.
  size_t params = 0;
  for (const GraphArg &a : c.graph->args)
    params += a.role == ArgRole::Param;
  EXPECT_EQ(params, 3u * 16u);
}

TEST(Sema, OverridesChangeTheModel) {
  std::string source = R"(
import std.nn
model M(hidden = 32) {
  input x: f32[4, 10]
  let fc = Linear(10, hidden)
  forward { return fc(x) }
}
)";
  Compiled base = compile(source);
  Compiled wide = compile(source, {{"hidden", "64"}});
  ASSERT_TRUE(base.graph && wide.graph) << base.errors << wide.errors;
  EXPECT_EQ(base.graph->parameterCount(), 10 * 32 + 32);
  EXPECT_EQ(wide.graph->parameterCount(), 10 * 64 + 64);
  Compiled bad = compile(source, {{"hiden", "64"}});
  EXPECT_TRUE(contains(
      bad.errors,
      "-D hiden: model 'M' has no hyper-parameter 'hiden' (it has: hidden)"))
      << bad.errors;
}

TEST(Sema, UnknownNamesSuggestTheClosest) {
  Compiled c = compile(model("input image: f32[4, 4]", "relu(imgae)"));
  EXPECT_TRUE(contains(c.errors, "unknown name 'imgae'; did you mean 'image'?"))
      << c.errors;
  Compiled d = compile(model("input image: f32[4, 4]", "rleu(image)"));
  EXPECT_TRUE(contains(d.errors, "unknown name 'rleu'; did you mean 'relu'?"))
      << d.errors;
}

TEST(Sema, ErrorsInsideLayersNameTheCallChain) {
  Compiled c = compile(R"(
import std.nn
model M() {
  input x: f32[4, 10]
  let fc = Linear(12, 3)
  forward { return fc(x) }
}
)");
  EXPECT_TRUE(contains(c.errors, "cannot matmul f32[4,10] by f32[12,3]"))
      << c.errors;
  EXPECT_TRUE(contains(c.errors, "note: while calling 'fc' (Linear)"))
      << c.errors;
}

TEST(Sema, SeveralIndependentErrors) {
  Compiled c = compile(R"(
import std.nn
model M() {
  input x: f32[4, 10]
  let fc = Linear(10, hiden)
  forward { return x @ x }
  train {
    optimizer = adamx()
    precision = f64
  }
}
)");
  EXPECT_EQ(c.errorCount, 4u) << c.errors;
}

TEST(Sema, HyperParametersAreCompileTime) {
  Compiled c = compile(R"(
import std.nn
model M() {
  input x: f32[4, 10]
  forward {
    let fc = 3
    return x
  }
  let layer = Linear(size(x, 0), 3)
}
)");
  EXPECT_GE(c.errorCount, 1u);
  Compiled d = compile(R"(
import std.nn
model M() {
  input x: f32[4, 10]
  let fc = Linear(x, 3)
  forward { return x }
}
)");
  EXPECT_TRUE(contains(
      d.errors, "hyper-parameter 'fan_in' must be known at compile time"))
      << d.errors;
}

TEST(Sema, IntegerArithmeticIsChecked) {
  EXPECT_EQ(outputType(compile(
                model("input a: f32[12]", "reshape(a, [12 // 5 + 1, 4])"))),
            "f32[3,4]");
  Compiled c = compile(model("input a: f32[12]", "reshape(a, [12 // 0, 4])"));
  EXPECT_TRUE(contains(c.errors, "division by zero")) << c.errors;
  Compiled d = compile(model("input a: f32[9223372036854775807 + 1]", "a"));
  EXPECT_TRUE(contains(d.errors, "integer overflow")) << d.errors;
}

TEST(Sema, RepeatCountIsBounded) {
  Compiled c = compile(R"(
import std.nn
model M() {
  input x: f32[2, 4]
  let fcs = repeat 0 { Linear(4, 4) }
  forward { return fcs(x) }
}
)");
  EXPECT_TRUE(contains(c.errors, "the repeat count must be between 1 and"))
      << c.errors;
}

TEST(Sema, TrainSectionIsValidated) {
  Compiled c = compile(R"(
import std.nn
model M() {
  input x: f32[4, 10]
  target y: i32[4]
  let fc = Linear(10, 3)
  forward { return fc(x) }
  train {
    optimizer = adamw(lr = 3e-4, betas = [0.9, 0.95])
    schedule = cosine(warmup = 10)
    loss = cross_entropy
    precision = bf16
    memory_budget = 64MiB
    prune fc.weight = magnitude(sparsity = 0.5, end = 1000)
    quantize fc.* = qat(bits = 4, per_tensor)
  }
}
)");
  ASSERT_TRUE(c.graph) << c.errors;
  ASSERT_EQ(c.graph->outputNames, (std::vector<std::string>{"loss", "output"}));
  EXPECT_EQ(c.graph->values[c.graph->outputs[0]].str(), "f32[]");
  std::map<std::string, std::string> settings;
  for (const Setting &s : c.graph->train)
    settings[s.key] = s.value.str();
  EXPECT_EQ(settings["optimizer"],
            "adamw(lr=0.0003, betas=[0.9, 0.95], eps=1e-08, weight_decay=0.01, "
            "decay_params=all)");
  EXPECT_EQ(settings["memory_budget"], std::to_string(64 << 20));
  EXPECT_EQ(settings["precision"], "bf16");
  EXPECT_EQ(settings["prune"], "magnitude(sparsity=0.5, scope=layer, start=0, "
                               "end=1000, every=100, params=[\"fc.weight\"])");
  EXPECT_EQ(settings["quantize"],
            "qat(bits=4, granularity=per_tensor, scheme=symmetric, "
            "observer=minmax, params=[\"fc.weight\", \"fc.bias\"])");
}

TEST(Sema, TrainSectionErrors) {
  Compiled c = compile(R"(
import std.nn
model M() {
  input x: f32[4, 10]
  target y: i32[4]
  let fc = Linear(10, 3)
  forward { return fc(x) }
  train {
    optimizer = adamw(lr = -1, bets = [0.9, 0.95])
    prune fc.wieght = magnitude(sparsity = 0.5)
    memory_budget = 0
    learning_rate = 3
  }
}
)");
  EXPECT_TRUE(
      contains(c.errors, "argument 'lr' of adamw must be positive, not -1"))
      << c.errors;
  EXPECT_TRUE(contains(c.errors,
                       "'bets' is not an argument of adamw(lr, betas, eps, "
                       "weight_decay, decay_params); did you mean 'betas'?"))
      << c.errors;
  EXPECT_TRUE(contains(
      c.errors, "no parameter matches 'fc.wieght'; did you mean 'fc.weight'?"))
      << c.errors;
  EXPECT_TRUE(contains(c.errors, "'memory_budget' must be a positive size"))
      << c.errors;
  EXPECT_TRUE(contains(c.errors, "unknown train setting 'learning_rate'"))
      << c.errors;
}

TEST(Sema, InitializersAreValidated) {
  Compiled c = compile(R"(
model M() {
  input x: f32[4]
  param w: f32[4] = normal(std = 0)
  param v: f32[4] = gaussian(0.1)
  forward { return x * w * v }
}
)");
  EXPECT_TRUE(contains(c.errors, "argument 'std' of normal must be positive"))
      << c.errors;
  EXPECT_TRUE(contains(c.errors, "unknown initializer 'gaussian'")) << c.errors;
}

TEST(Sema, ModelNamesDoNotCaptureLibraryNames) {
  // A model named MLP in the main file; std's TransformerBlock still uses
  // std's MLP layer.
  Compiled c = compile(R"(
import std.nn
model MLP() {
  input x: f32[2, 4, 8]
  let block = TransformerBlock(8, 2)
  forward { return block(x) }
}
)");
  EXPECT_TRUE(c.graph) << c.errors;
}
