//===- InterpreterTest.cpp - The reference interpreter's exact semantics --===//

#include "lang/interpreter/Interpreter.h"
#include "lang/MnemoOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace mnemo;

namespace {
float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
} // namespace

TEST(Rounding, Bf16IsRoundToNearestEven) {
  // 1 + 2^-8 lies exactly between bf16 neighbours 1 and 1 + 2^-7: ties go to
  // the even mantissa (1); 1 + 3 * 2^-8 goes up to the even 1 + 2^-6.
  EXPECT_EQ(roundTo(ElementType::BF16, 1.0 + std::ldexp(1.0, -8)), 1.0);
  EXPECT_EQ(roundTo(ElementType::BF16, 1.0 + 3 * std::ldexp(1.0, -8)),
            1.0 + std::ldexp(1.0, -6));
  // Just above the tie rounds up.
  EXPECT_EQ(roundTo(ElementType::BF16, fromBits(0x3F808001)),
            fromBits(0x3F810000));
  EXPECT_EQ(roundTo(ElementType::BF16, -1.0), -1.0);
  EXPECT_TRUE(std::isinf(roundTo(ElementType::BF16, 3.4e38)));
  EXPECT_TRUE(std::isnan(roundTo(ElementType::BF16, NAN)));
}

TEST(Rounding, F16IsRoundToNearestEvenWithSubnormalsAndOverflow) {
  // f16 has 11 bits of precision: 2049 is a tie between 2048 and 2050.
  EXPECT_EQ(roundTo(ElementType::F16, 2049.0), 2048.0);
  EXPECT_EQ(roundTo(ElementType::F16, 2051.0), 2052.0);
  EXPECT_EQ(roundTo(ElementType::F16, 65504.0), 65504.0);
  EXPECT_TRUE(std::isinf(roundTo(ElementType::F16, 65520.0))); // ties to 65536
  EXPECT_EQ(roundTo(ElementType::F16, 65519.0), 65504.0);
  // The smallest subnormal is 2^-24; half of it ties to zero.
  EXPECT_EQ(roundTo(ElementType::F16, std::ldexp(1.0, -24)),
            std::ldexp(1.0, -24));
  EXPECT_EQ(roundTo(ElementType::F16, std::ldexp(1.0, -25)), 0.0);
  EXPECT_EQ(roundTo(ElementType::F16, 3 * std::ldexp(1.0, -25)),
            std::ldexp(1.0, -23));
}

TEST(Rounding, F32AndIntegers) {
  EXPECT_EQ(roundTo(ElementType::F32, 0.1), double(0.1f));
  EXPECT_EQ(roundTo(ElementType::I32, -2.7), -2.0);
  EXPECT_EQ(roundTo(ElementType::I8, 130.0), -126.0);
}

namespace {
class InterpreterTest : public ::testing::Test {
protected:
  func::FuncOp parse(const char *text) {
    context.getOrLoadDialect<MnemoDialect>();
    context.getOrLoadDialect<func::FuncDialect>();
    module = parseSourceString<ModuleOp>(text, &context);
    return module ? *module->getOps<func::FuncOp>().begin() : nullptr;
  }
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};
} // namespace

TEST_F(InterpreterTest, Bf16ResultsAreRoundedAfterEachOp) {
  func::FuncOp f = parse(R"(
    func.func @f(%a: tensor<1xbf16>, %b: tensor<1xbf16>) -> tensor<1xbf16> {
      %s = mnemo.add %a, %b : tensor<1xbf16>
      return %s : tensor<1xbf16>
    })");
  ASSERT_TRUE(f);
  Tensor a(ElementType::BF16, {1}, 1.0),
      b(ElementType::BF16, {1}, std::ldexp(1.0, -8));
  std::string error;
  auto out = Interpreter().run(f, {a, b}, error);
  ASSERT_TRUE(succeeded(out)) << error;
  EXPECT_EQ((*out)[0].data[0], 1.0); // 1 + 2^-8 ties to even in bf16
  // In exact mode nothing is rounded.
  auto exact = Interpreter(InterpreterOptions{true, 0}).run(f, {a, b}, error);
  EXPECT_EQ((*exact)[0].data[0], 1.0 + std::ldexp(1.0, -8));
}

TEST_F(InterpreterTest, DropoutIsSeededAndScaled) {
  func::FuncOp f = parse(R"(
    func.func @f(%x: tensor<1000xf32>) -> tensor<1000xf32> {
      %y = mnemo.dropout %x {p = 0.25 : f64, seed = 3 : i64} : tensor<1000xf32>
      return %y : tensor<1000xf32>
    })");
  ASSERT_TRUE(f);
  Tensor x(ElementType::F32, {1000}, 1.0);
  std::string error;
  auto run = [&](int64_t step) {
    return *Interpreter(InterpreterOptions{false, step}).run(f, {x}, error);
  };
  std::vector<Tensor> first = run(1), again = run(1), next = run(2);
  int dropped = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    double v = first[0].data[i];
    EXPECT_TRUE(v == 0.0 || std::fabs(v - 1.0 / 0.75) < 1e-6);
    dropped += v == 0.0;
  }
  EXPECT_NEAR(dropped, 250, 50);           // about p of the elements
  EXPECT_EQ(first[0].data, again[0].data); // same seed and step: same mask
  EXPECT_NE(first[0].data, next[0].data);  // another step: another mask
}

TEST_F(InterpreterTest, ErrorsNameTheOp) {
  func::FuncOp f = parse(R"(
    func.func @f(%t: tensor<4x2xf32>, %i: tensor<3xi32>) -> tensor<3x2xf32> {
      %y = mnemo.embedding %t, %i : (tensor<4x2xf32>, tensor<3xi32>) -> tensor<3x2xf32>
      return %y : tensor<3x2xf32>
    })");
  ASSERT_TRUE(f);
  Tensor table(ElementType::F32, {4, 2}), indices(ElementType::I32, {3}, 7);
  std::string error;
  EXPECT_TRUE(failed(Interpreter().run(f, {table, indices}, error)));
  EXPECT_NE(error.find("mnemo.embedding"), std::string::npos) << error;
  EXPECT_NE(error.find("index 7 is out of range for 4 rows"), std::string::npos)
      << error;
  EXPECT_TRUE(failed(Interpreter().run(f, {table}, error)));
  EXPECT_NE(error.find("takes 2 arguments, not 1"), std::string::npos) << error;
}
