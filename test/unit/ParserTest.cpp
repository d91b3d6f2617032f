//===- ParserTest.cpp - Recursive-descent parser --------------------------===//

#include "frontend/Parser.h"
#include "frontend/AST.h"
#include "frontend/Diagnostics.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mnemo;

namespace {
struct Parsed {
  std::string ast;
  std::string errors;
  unsigned errorCount = 0;
};

Parsed parse(llvm::StringRef text) {
  Parsed out;
  llvm::SourceMgr sm;
  unsigned id = sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "t.mn"), llvm::SMLoc());
  llvm::raw_string_ostream err(out.errors);
  Diagnostics diags(sm, err);
  std::unique_ptr<Module> module = parseBuffer(id, diags);
  module->fileName = "t.mn";
  llvm::raw_string_ostream os(out.ast);
  printAST(*module, sm, os);
  os.flush();
  err.flush();
  out.errorCount = diags.errorCount();
  return out;
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}
} // namespace

TEST(Parser, Precedence) {
  Parsed p = parse("model M() { forward { return -a + b * c @ d ** 2 - e } }");
  EXPECT_EQ(p.errorCount, 0u) << p.errors;
  // ** binds tightest, then unary minus, then * and @ (left to right), then
  // +/-.
  EXPECT_TRUE(contains(p.ast, "return (- (+ (- a) (@ (* b c) (** d 2))) e)"))
      << p.ast;
}

TEST(Parser, ComparisonsAndLogic) {
  Parsed p = parse(
      "layer L(a) { if a % 2 == 0 and not a > 4 or a == 1 { let x = 1 } }");
  EXPECT_EQ(p.errorCount, 0u) << p.errors;
  EXPECT_TRUE(
      contains(p.ast, "if (or (and (== (% a 2) 0) (not (> a 4))) (== a 1))"))
      << p.ast;
}

TEST(Parser, CallsMembersAndKeywordArguments) {
  Parsed p = parse("model M() { forward { return softmax(x.T, axis = -1) } }");
  EXPECT_EQ(p.errorCount, 0u) << p.errors;
  EXPECT_TRUE(contains(p.ast, "(call softmax (. x T) axis=(- 1))")) << p.ast;
}

TEST(Parser, DeclarationsRepeatAndTrain) {
  Parsed p = parse(R"(
model M(n = 2, d = 8) {
  input x: f32[4, d]
  target y: i32[4]
  param w: f32[d, d] = normal(std = 0.02)
  let blocks = repeat n { Block(d) }
  forward {
    return blocks(x)
  }
  train {
    optimizer = adamw(lr = 3e-4)
    memory_budget = 512MiB
    prune blocks.*.fc.weight = magnitude(sparsity = 0.5)
    quantize blocks.0.fc.weight = int8(per_channel)
  }
}
)");
  EXPECT_EQ(p.errorCount, 0u) << p.errors;
  EXPECT_TRUE(contains(p.ast, "model M(n = 2, d = 8) <2:7>")) << p.ast;
  EXPECT_TRUE(contains(p.ast, "input x: f32[4, d] <3:3>")) << p.ast;
  EXPECT_TRUE(contains(p.ast, "param w: f32[d, d] = (call normal std=0.02)"))
      << p.ast;
  EXPECT_TRUE(contains(p.ast, "let blocks = (repeat n (call Block d))"))
      << p.ast;
  EXPECT_TRUE(contains(p.ast, "set memory_budget = 536870912B")) << p.ast;
  EXPECT_TRUE(contains(
      p.ast, "prune blocks.*.fc.weight = (call magnitude sparsity=0.5)"))
      << p.ast;
  EXPECT_TRUE(
      contains(p.ast, "quantize blocks.0.fc.weight = (call int8 per_channel)"))
      << p.ast;
}

TEST(Parser, RecoversAndReportsSeveralErrors) {
  Parsed p = parse(R"(
model M() {
  let a = (1 +
  let b = 2 3
  let c = 4
  forward {
    return c
  }
}
)");
  EXPECT_EQ(p.errorCount, 2u) << p.errors;
  // The unclosed parenthesis runs into the next statement, where the parser
  // reports it and recovers.
  EXPECT_TRUE(contains(p.errors,
                       "t.mn:4:3: error: expected an expression, found 'let'"))
      << p.errors;
  EXPECT_TRUE(
      contains(p.errors, "t.mn:4:13: error: expected the end of the statement"))
      << p.errors;
  // The statements after the errors were still parsed.
  EXPECT_TRUE(contains(p.ast, "let c = 4")) << p.ast;
  EXPECT_TRUE(contains(p.ast, "return c")) << p.ast;
}

TEST(Parser, CaretPointsAtTheProblem) {
  Parsed p = parse("model M() {\n  let x = relu(1,\n}\n");
  EXPECT_TRUE(
      contains(p.errors, "t.mn:3:1: error: expected an expression, found '}'"))
      << p.errors;
  EXPECT_TRUE(contains(p.errors, "\n}\n^\n")) << p.errors;
}

TEST(Parser, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "model M() { forward { return " + std::string(5000, '(') +
                     "1" + std::string(5000, ')') + " } }";
  Parsed p = parse(deep);
  EXPECT_TRUE(contains(p.errors, "nested too deeply"))
      << p.errors.substr(0, 200);
}

TEST(Parser, TopLevelJunk) {
  Parsed p = parse("foo bar\nlayer L() { }\n");
  EXPECT_EQ(p.errorCount, 1u) << p.errors;
  EXPECT_TRUE(contains(p.ast, "layer L()")) << p.ast;
}
