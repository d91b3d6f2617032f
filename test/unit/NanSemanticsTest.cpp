//===- NanSemanticsTest.cpp - NaN, infinities and masks, as PyTorch -------===//
//
// PyTorch propagates a NaN through relu, max and max_pool (torch.relu(nan)
// is nan), gives relu's gradient by threshold_backward (x <= 0 ? 0 : g),
// and exp(-inf) is exactly 0. A kernel that compares with `>` silently
// turns a NaN into 0 and hides a diverged run, so each op is checked here
// in the reference interpreter and in the CPU kernels. The CUDA kernels
// (runtime/cuda/Kernels.cuh) spell the same rules (relu, nanMax in every
// max reduction and pooling window, fastExp); no GPU has run them yet.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoDialect.h"
#include "lang/interpreter/Interpreter.h"
#include "lang/ops/pooling/PoolingKernels.h"
#include "lang/ops/reductions/ReductionsKernels.h"
#include "lang/ops/softmax/SoftmaxKernels.h"
#include "runtime/cpu/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mnemo;

namespace {

const char *const kModule = R"mlir(
func.func @relu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = mnemo.relu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @relu_grad(%g: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %dx = mnemo.relu_grad %g, %y : tensor<4xf32>
  return %dx : tensor<4xf32>
}
func.func @max(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  %y = mnemo.max %x {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
func.func @pool(%x: tensor<1x1x2x4xf32>) -> tensor<1x1x1x2xf32> {
  %y = mnemo.max_pool2d %x {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : (tensor<1x1x2x4xf32>) -> tensor<1x1x1x2xf32>
  return %y : tensor<1x1x1x2xf32>
}
func.func @softmax(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %y = mnemo.softmax %x {axis = -1 : i64} : tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}
)mlir";

struct Fixture {
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  Fixture() {
    context.getOrLoadDialect<MnemoDialect>();
    context.getOrLoadDialect<func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kModule, &context);
  }
  std::vector<double> run(const char *name, std::vector<Tensor> args) {
    auto f = module->lookupSymbol<func::FuncOp>(name);
    std::string error;
    auto out = Interpreter().run(f, args, error);
    EXPECT_TRUE(succeeded(out)) << error;
    return succeeded(out) ? (*out)[0].data : std::vector<double>{};
  }
};

Tensor tensor(std::vector<int64_t> shape, std::vector<double> values) {
  Tensor t(ElementType::F32, std::move(shape));
  t.data = std::move(values);
  return t;
}

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

} // namespace

TEST(NanSemantics, ReluPropagatesNan) {
  Fixture f;
  ASSERT_TRUE(f.module);
  std::vector<double> y = f.run("relu", {tensor({4}, {kNan, -1, 2, -kInf})});
  ASSERT_EQ(y.size(), 4u);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 0);
  EXPECT_EQ(y[2], 2);
  EXPECT_EQ(y[3], 0);
  EXPECT_TRUE(std::isnan(elementwise::relu(NAN)));
  EXPECT_EQ(elementwise::relu(-1.0f), 0.0f);
  EXPECT_EQ(elementwise::relu(3.0f), 3.0f);
}

TEST(NanSemantics, ReluGradIsThresholdBackward) {
  Fixture f;
  ASSERT_TRUE(f.module);
  // threshold_backward of relu's output: y <= 0 ? 0 : g, so a NaN (whose
  // relu is NaN) passes the gradient.
  std::vector<double> y = f.run("relu_grad", {tensor({4}, {5, 5, 5, kNan}),
                                              tensor({4}, {kNan, -1, 2, 1})});
  ASSERT_EQ(y.size(), 4u);
  EXPECT_EQ(y[0], 5);
  EXPECT_EQ(y[1], 0);
  EXPECT_EQ(y[2], 5);
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(elementwise::relu_grad(5.0f, NAN), 5.0f);
  EXPECT_EQ(elementwise::relu_grad(5.0f, 0.0f), 0.0f);
}

TEST(NanSemantics, MaxPropagatesNan) {
  Fixture f;
  ASSERT_TRUE(f.module);
  // A NaN first, a NaN last: either way the row's maximum is NaN.
  std::vector<double> x = {kNan, 1, 2, 3, 4, kNan};
  std::vector<double> y = f.run("max", {tensor({2, 3}, x)});
  ASSERT_EQ(y.size(), 2u);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_TRUE(std::isnan(y[1]));
  std::vector<float> xf(x.begin(), x.end()), out(2);
  int64_t shape[] = {2, 3};
  cpu::reduce(cpu::ReduceKind::Max, xf.data(), shape, 2, 0b10, out.data());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
  // Columns (the reduced axis first) take the other kernel's path.
  int64_t columns[] = {3, 2};
  cpu::reduce(cpu::ReduceKind::Max, xf.data(), columns, 2, 0b01, out.data());
  EXPECT_TRUE(std::isnan(out[0])); // {nan, 2, 4}
  EXPECT_TRUE(std::isnan(out[1])); // {1, 3, nan}
}

TEST(NanSemantics, MaxPoolPropagatesNan) {
  Fixture f;
  ASSERT_TRUE(f.module);
  // Two 2x2 windows of a 2x4 plane; the first holds a NaN.
  std::vector<double> x = {1, kNan, 5, 6, 3, 4, 7, 8};
  std::vector<double> y = f.run("pool", {tensor({1, 1, 2, 4}, x)});
  ASSERT_EQ(y.size(), 2u);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 8);
  std::vector<float> xf(x.begin(), x.end()), out(2);
  cpu::PoolShape halving{1, 2, 4, 1, 2, 2, 2, 2, 2, 0, 0};
  cpu::maxPool2d(halving, xf.data(), out.data());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 8.0f);
  // The first window's gradient goes to its NaN, the second's to its 8
  // (torch.nn.functional.max_pool2d's backward gives these two vectors).
  std::vector<float> ones = {1, 1}, grad(8);
  cpu::maxPool2dGrad(halving, ones.data(), xf.data(), grad.data());
  EXPECT_EQ(grad, (std::vector<float>{0, 1, 0, 0, 0, 0, 0, 1}));
  // A 2x3 window with stride 1: the general kernel, not the halving one.
  cpu::PoolShape general{1, 2, 4, 1, 2, 2, 3, 1, 1, 0, 0};
  cpu::maxPool2d(general, xf.data(), out.data());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
  // Both windows hold the NaN, which takes their gradients (PyTorch's
  // choice, and PoolingFormulas.h's windowArgmax for the interpreter and
  // the GPU), not the 7 that is the first window's largest number.
  std::fill(grad.begin(), grad.end(), 0.0f);
  cpu::maxPool2dGrad(general, ones.data(), xf.data(), grad.data());
  EXPECT_EQ(grad, (std::vector<float>{0, 2, 0, 0, 0, 0, 0, 0}));
}

TEST(NanSemantics, ErfKeepsItsLimitsAndNan) {
  using mnemo::elementwise::fastErf;
  EXPECT_EQ(fastErf(INFINITY), 1.0f);
  EXPECT_EQ(fastErf(-INFINITY), -1.0f);
  EXPECT_EQ(fastErf(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(fastErf(NAN)));
  // GELU reads 1 + erf: an absolute error of 5e-7 at most (3.7e-7
  // measured; the C library's erff, which it replaces, is within 1e-7),
  // and erf is odd.
  for (float x = -6.0f; x <= 6.0f; x += 1.0f / 64)
    ASSERT_NEAR(fastErf(x), std::erf(double(x)), 5e-7) << x;
  EXPECT_EQ(fastErf(-0.3f), -fastErf(0.3f));
}

TEST(NanSemantics, ExpOfMinusInfinityIsZeroNotSubnormal) {
  // A masked attention score: exp(-inf) and exp(-1e4) are exact zeros.
  EXPECT_EQ(cpu::fastExp(-INFINITY), 0.0f);
  EXPECT_EQ(cpu::fastExp(-1e4f), 0.0f);
  EXPECT_EQ(cpu::fastExp(-90.0f), 0.0f);
  EXPECT_GE(cpu::fastExp(-87.0f), std::numeric_limits<float>::min());
  EXPECT_TRUE(std::isinf(cpu::fastExp(INFINITY)));
  EXPECT_TRUE(std::isinf(cpu::fastExp(89.0f)));
  EXPECT_TRUE(std::isnan(cpu::fastExp(NAN)));
  // Within 2 ulp of the C library elsewhere.
  for (float x : {-87.0f, -20.0f, -1.0f, 0.0f, 0.5f, 10.0f, 88.0f})
    EXPECT_NEAR(cpu::fastExp(x), std::exp(x), 2.4e-7f * std::exp(x)) << x;
  Fixture f;
  ASSERT_TRUE(f.module);
  std::vector<double> y =
      f.run("softmax", {tensor({1, 4}, {0, -kInf, 1, -1e30})});
  ASSERT_EQ(y.size(), 4u);
  EXPECT_EQ(y[1], 0);
  EXPECT_EQ(y[3], 0);
  std::vector<float> xf = {0, -INFINITY, 1, -1e30f}, out(4);
  cpu::softmaxAlongAxis(xf.data(), out.data(), 1, 4, 1, false);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_NEAR(out[0] + out[2], 1.0f, 1e-6f);
}
