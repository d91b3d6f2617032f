//===- ClassifierKernelTest.cpp - linear_cross_entropy's CPU kernels -----===//
//
// The fused classifier loss's CPU kernels (lang/ops/losses/LossesKernels.h)
// against the product and loss written out in double, on more classes than
// one block of 16-bit operands (so the online log-sum-exp merges blocks and
// the weight is widened and its gradient narrowed a block at a time), both
// weight layouts, label smoothing, ignored rows and a bias (whose gradient
// sums over the chunks and, in 16-bit, the blocks), and the evaluation
// step's accuracy (the first maximum found across the blocks), and the
// training step's one pass (loss and gradients together) against the two
// kernels; each kernel run in exactly the workspace the plan gives it,
// with a guard after it. bf16 runs both ways: sgemm on widened operands,
// and oneDNN's bf16 products (ClassifierProducts) where this CPU has them.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/losses/LossesKernels.h"
#include "runtime/cpu/Half.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

using namespace mnemo;
using cpu::bf16_t;
using cpu::f16_t;

namespace {

// 16 features: at 8, oneDNN pads the hidden gradient's product to 16
// columns, and its packed weight block outgrows the room the kernels give
// its scratchpad (the widened weight block's): the product would widen.
constexpr int64_t kRows = 70, kDim = 16, kClasses = 5000, kChunkRows = 32;
constexpr int64_t kIgnore = -100;
constexpr float kGuard = 12345.0f;

struct Expected {
  double loss = 0;
  std::vector<double> logSumExp, hiddenGrad, weightGrad, biasGrad;
  /// Counted rows whose first maximum is the target: surely, and counting
  /// the rows whose two largest logits are too close for f32 to order.
  int64_t surelyCorrect = 0, maybeCorrect = 0;
};

/// Logits closer than this may come out of the kernels' f32 products in
/// either order: their error is a few f32 ulps of terms of magnitude ~10.
constexpr double kTieGap = 1e-4;

/// Each row's logits in double, the weight element (class c, feature d)
/// read through `w`; `bias` empty for none.
template <typename W>
std::vector<double> rowLogits(const std::vector<double> &hidden, W w,
                              const std::vector<double> &bias, int64_t r) {
  std::vector<double> logits(kClasses);
  for (int64_t c = 0; c < kClasses; ++c) {
    logits[c] = bias.empty() ? 0.0 : bias[c];
    for (int64_t d = 0; d < kDim; ++d)
      logits[c] += hidden[r * kDim + d] * w(c, d);
  }
  return logits;
}

/// The first maximum's class.
int64_t firstMax(const std::vector<double> &logits) {
  return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

/// The loss and gradients in double from the operands as stored, the
/// weight element (class c, feature d) read through `w`; `bias` empty for
/// none.
template <typename W>
Expected reference(const std::vector<double> &hidden, W w,
                   const std::vector<double> &bias,
                   const std::vector<int32_t> &targets, double smoothing,
                   bool transposed) {
  Expected e;
  e.logSumExp.assign(kRows, 0);
  e.hiddenGrad.assign(kRows * kDim, 0);
  e.weightGrad.assign(kClasses * kDim, 0);
  e.biasGrad.assign(kClasses, 0);
  int64_t counted = 0;
  for (int32_t t : targets)
    counted += t != kIgnore;
  for (int64_t r = 0; r < kRows; ++r) {
    std::vector<double> logits = rowLogits(hidden, w, bias, r);
    double m = -INFINITY, sum = 0, logitSum = 0;
    for (int64_t c = 0; c < kClasses; ++c) {
      m = std::max(m, logits[c]);
      logitSum += logits[c];
    }
    for (int64_t c = 0; c < kClasses; ++c)
      sum += std::exp(logits[c] - m);
    double lse = std::log(sum) + m;
    e.logSumExp[r] = lse;
    int32_t t = targets[r];
    if (t == kIgnore)
      continue;
    // The target against the largest of the other classes.
    double other = -INFINITY;
    for (int64_t c = 0; c < kClasses; ++c)
      if (c != t)
        other = std::max(other, logits[c]);
    e.surelyCorrect += logits[t] > other + kTieGap;
    e.maybeCorrect += logits[t] > other - kTieGap;
    e.loss += ((1 - smoothing) * (lse - logits[t]) +
               smoothing * (lse - logitSum / kClasses)) /
              double(counted);
    for (int64_t c = 0; c < kClasses; ++c) {
      double g = (std::exp(logits[c] - lse) - (c == t ? 1 - smoothing : 0) -
                  smoothing / kClasses) /
                 double(counted);
      e.biasGrad[c] += g;
      for (int64_t d = 0; d < kDim; ++d) {
        e.hiddenGrad[r * kDim + d] += g * w(c, d);
        int64_t at = transposed ? c * kDim + d : d * kClasses + c;
        e.weightGrad[at] += g * hidden[r * kDim + d];
      }
    }
  }
  return e;
}

/// |got - want| within `relative` of the largest expected magnitude: the
/// kernels sum in f32 in their own order (and narrow 16-bit gradients), so
/// elements near zero carry the error of the larger terms they sum.
void expectClose(const std::vector<double> &want, const std::vector<float> &got,
                 double relative, const char *what) {
  double scale = 0;
  for (double x : want)
    scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], relative * scale) << what << " [" << i << "]";
}

/// How a 16-bit run computes its products.
enum class Products { Widened, OneDnn };

template <typename T>
void checkKernels(bool transposed, double smoothing, double relative,
                  bool withBias = false, Products how = Products::Widened) {
  std::mt19937 rng(transposed * 2 + (smoothing != 0) + 4 * withBias);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> klass(0, kClasses - 1);
  std::vector<T> hidden(kRows * kDim), weight(kClasses * kDim);
  for (T &x : hidden)
    x = T(normal(rng));
  for (T &x : weight)
    x = T(0.5f * normal(rng));
  std::vector<T> bias(withBias ? kClasses : 0);
  for (T &x : bias)
    x = T(normal(rng));
  const T *biasData = withBias ? bias.data() : nullptr;
  std::vector<double> hidden64(hidden.begin(), hidden.end());
  auto w = [&](int64_t c, int64_t d) {
    return double(float(weight[transposed ? c * kDim + d : d * kClasses + c]));
  };
  std::vector<double> bias64;
  for (T x : bias)
    bias64.push_back(double(float(x)));
  // Every third row's target is its largest logit, so that the accuracy
  // counts hits in every class block.
  std::vector<int32_t> targets(kRows);
  for (int64_t r = 0; r < kRows; ++r)
    targets[r] = r % 9 == 4 ? int32_t(kIgnore)
                 : r % 3 == 0
                     ? int32_t(firstMax(rowLogits(hidden64, w, bias64, r)))
                     : klass(rng);
  targets[1] = 0, targets[2] = kClasses - 1; // the first and last block

  Expected want =
      reference(hidden64, w, bias64, targets, smoothing, transposed);

  losses::ClassifierGeometry g{
      kRows, kDim, kClasses, kChunkRows, !std::is_same_v<T, float>, withBias};
  std::unique_ptr<cpu::ClassifierProducts> sites;
  if (how == Products::OneDnn) {
    sites = std::make_unique<cpu::ClassifierProducts>(g, transposed,
                                                      cpu::MatmulData::BF16);
    cpu::prepareMatmuls(2);
    if (!sites->native())
      GTEST_SKIP() << "no native bf16 product here: " << cpu::matmulSummary();
  }
  const cpu::ClassifierProducts *products = sites.get();
  for (bool backward : {false, true}) {
    int64_t floats = losses::classifierWorkspaceFloats(g, backward);
    std::vector<float> workspace(floats + 64, kGuard);
    if (!backward) {
      float loss = 0, accuracy = -1;
      std::vector<float> lse(kRows);
      ASSERT_TRUE(cpu::linearCrossEntropy(
          hidden.data(), weight.data(), targets.data(), biasData, g, transposed,
          kIgnore, smoothing, &loss, lse.data(), &accuracy, products,
          workspace.data()));
      EXPECT_NEAR(loss, want.loss, 1e-5 * std::abs(want.loss));
      expectClose(want.logSumExp, lse, 1e-6, "log-sum-exp");
      // The accuracy is a count of hits over the counted rows (exact in
      // f32 for 70 rows).
      int64_t counted = 0;
      for (int32_t t : targets)
        counted += t != kIgnore;
      double hits = std::round(double(accuracy) * double(counted));
      EXPECT_FLOAT_EQ(accuracy, float(hits / double(counted)));
      EXPECT_GE(hits, double(want.surelyCorrect));
      EXPECT_LE(hits, double(want.maybeCorrect));
      EXPECT_GE(want.surelyCorrect, kRows / 4) << "the test's own hits";
      // Without the accuracy asked for, the loss is the same.
      float lossAlone = 0;
      ASSERT_TRUE(cpu::linearCrossEntropy(
          hidden.data(), weight.data(), targets.data(), biasData, g, transposed,
          kIgnore, smoothing, &lossAlone, lse.data(), nullptr, products,
          workspace.data()));
      EXPECT_EQ(loss, lossAlone);
    } else {
      std::vector<float> lse(want.logSumExp.begin(), want.logSumExp.end());
      std::vector<T> hiddenGrad(kRows * kDim), weightGrad(kClasses * kDim),
          biasGrad(bias.size());
      float one = 1.0f;
      ASSERT_TRUE(cpu::linearCrossEntropyGrad(
          &one, hidden.data(), weight.data(), targets.data(), lse.data(),
          biasData, g, transposed, kIgnore, smoothing, hiddenGrad.data(),
          weightGrad.data(), withBias ? biasGrad.data() : nullptr, products,
          workspace.data()));
      if (withBias)
        expectClose(want.biasGrad,
                    std::vector<float>(biasGrad.begin(), biasGrad.end()),
                    relative, "bias gradient");
      expectClose(want.hiddenGrad,
                  std::vector<float>(hiddenGrad.begin(), hiddenGrad.end()),
                  relative, "hidden gradient");
      expectClose(want.weightGrad,
                  std::vector<float>(weightGrad.begin(), weightGrad.end()),
                  relative, "weight gradient");
    }
    for (int64_t i = floats; i < floats + 64; ++i)
      ASSERT_EQ(workspace[i], kGuard) << "wrote past the workspace";
  }

  // The training step's one pass (linearCrossEntropyWithGrad): the loss and
  // gradients of the forward kernel followed by the backward kernel on the
  // forward's log-sum-exp, to the bit (one block of classes: the same
  // products, scans and sums in one pass; several: the two kernels), in
  // its own workspace.
  float two = 0.5f, twoPassLoss = 0, onePassLoss = 0;
  std::vector<float> lse(kRows),
      twoPassWorkspace(losses::classifierWorkspaceFloats(g, false) +
                       losses::classifierWorkspaceFloats(g, true));
  std::array<std::vector<T>, 3> twoPass = {std::vector<T>(kRows * kDim),
                                           std::vector<T>(kClasses * kDim),
                                           std::vector<T>(bias.size())},
                                onePass = twoPass;
  ASSERT_TRUE(cpu::linearCrossEntropy(
      hidden.data(), weight.data(), targets.data(), biasData, g, transposed,
      kIgnore, smoothing, &twoPassLoss, lse.data(), nullptr, products,
      twoPassWorkspace.data()));
  ASSERT_TRUE(cpu::linearCrossEntropyGrad(
      &two, hidden.data(), weight.data(), targets.data(), lse.data(), biasData,
      g, transposed, kIgnore, smoothing, twoPass[0].data(), twoPass[1].data(),
      withBias ? twoPass[2].data() : nullptr, products,
      twoPassWorkspace.data()));
  int64_t floats = losses::classifierWithGradWorkspaceFloats(g);
  std::vector<float> workspace(floats + 64, kGuard);
  ASSERT_TRUE(cpu::linearCrossEntropyWithGrad(
      &two, hidden.data(), weight.data(), targets.data(), biasData, g,
      transposed, kIgnore, smoothing, &onePassLoss, onePass[0].data(),
      onePass[1].data(), withBias ? onePass[2].data() : nullptr, products,
      workspace.data()));
  for (int64_t i = floats; i < floats + 64; ++i)
    ASSERT_EQ(workspace[i], kGuard) << "wrote past the workspace";
  EXPECT_EQ(onePassLoss, twoPassLoss);
  for (int k = 0; k < 3; ++k)
    for (size_t i = 0; i < onePass[k].size(); ++i)
      ASSERT_EQ(float(onePass[k][i]), float(twoPass[k][i]))
          << "gradient " << k << " [" << i << "]";
}

// f32: the sums' rounding alone (products of 16 terms, 70 rows), 1e-5 of
// the largest gradient. 16-bit: the gradients are rounded to 8 (bf16) or
// 11 (f16) significant bits, 2^-8 of the largest.
TEST(ClassifierKernels, F32Transposed) { checkKernels<float>(true, 0.0, 1e-5); }
TEST(ClassifierKernels, F32Untransposed) {
  checkKernels<float>(false, 0.1, 1e-5);
}
TEST(ClassifierKernels, Bf16AcrossClassBlocksTransposed) {
  ASSERT_LT(losses::kHalfClassBlock, kClasses);
  checkKernels<bf16_t>(true, 0.1, 1.0 / 256);
}
TEST(ClassifierKernels, Bf16AcrossClassBlocksUntransposed) {
  checkKernels<bf16_t>(false, 0.0, 1.0 / 256);
}
TEST(ClassifierKernels, F16AcrossClassBlocks) {
  checkKernels<f16_t>(false, 0.1, 1.0 / 256);
}
TEST(ClassifierKernels, F32BiasTransposed) {
  checkKernels<float>(true, 0.1, 1e-5, /*withBias=*/true);
}
TEST(ClassifierKernels, F32BiasUntransposed) {
  checkKernels<float>(false, 0.0, 1e-5, /*withBias=*/true);
}
TEST(ClassifierKernels, Bf16BiasAcrossClassBlocks) {
  checkKernels<bf16_t>(true, 0.0, 1.0 / 256, /*withBias=*/true);
}
// oneDNN's products round the logits' gradient to bf16 before the
// gradient products (2^-8 of each term at most, as autocast's bf16 logits
// do), on top of the narrowed result's 2^-8 of the largest: 2^-7. The
// hidden gradient sums 5000 such terms, which partly cancel (the largest
// error measured was 1.2 x 2^-8 of the largest gradient).
TEST(ClassifierKernels, Bf16OneDnnTransposed) {
  checkKernels<bf16_t>(true, 0.1, 2.0 / 256, true, Products::OneDnn);
}
TEST(ClassifierKernels, Bf16OneDnnUntransposed) {
  checkKernels<bf16_t>(false, 0.0, 2.0 / 256, false, Products::OneDnn);
}

} // namespace
