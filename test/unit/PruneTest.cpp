//===- PruneTest.cpp - The trainer's pruning against the interpreter's
//-----===//
//
// lang/ops/pruning/PruningKernels.h selects the elements to prune by radix
// selection over 32-bit keys; the interpreter's reference
// (lang/ops/pruning/PruningReference.h) sorts. Both must choose the same
// elements on random tensors full of ties, zeros, NaNs and earlier masks.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/pruning/PruningKernels.h"
#include "lang/ops/pruning/PruningReference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace mnemo::prune;
namespace reference = mnemo::reference;

namespace {

/// Weights on a coarse grid, so that many magnitudes tie, with a few NaNs
/// and infinities.
std::vector<float> randomWeights(std::mt19937 &rng, int64_t n) {
  std::uniform_int_distribution<int> grid(-6, 6), special(0, 99);
  std::vector<float> w(n);
  for (float &x : w) {
    x = float(grid(rng)) * 0.25f;
    int s = special(rng);
    if (s == 0)
      x = std::numeric_limits<float>::quiet_NaN();
    else if (s == 1)
      x = -std::numeric_limits<float>::infinity();
  }
  return w;
}

std::vector<uint32_t> randomMask(std::mt19937 &rng, int64_t n, double p) {
  std::bernoulli_distribution pruned(p);
  std::vector<uint32_t> mask(maskWords(n), 0);
  for (int64_t i = 0; i < n; ++i)
    if (pruned(rng))
      mask[i >> 5] |= 1u << (i & 31);
  return mask;
}

reference::PruneTarget referenceTarget(const std::vector<float> &w,
                                       const std::vector<uint32_t> &mask,
                                       std::vector<int64_t> shape) {
  reference::PruneTarget t;
  t.weight.assign(w.begin(), w.end());
  t.shape = std::move(shape);
  for (int64_t e = 0; e < int64_t(w.size()); ++e)
    t.pruned.push_back(bitOf(mask.data(), e));
  return t;
}

void expectSameMask(const std::vector<uint32_t> &mask,
                    const reference::PruneTarget &expected,
                    const std::string &what) {
  for (int64_t e = 0; e < int64_t(expected.pruned.size()); ++e)
    ASSERT_EQ(bitOf(mask.data(), e), bool(expected.pruned[e]))
        << what << ", element " << e;
}

TEST(Prune, MagnitudeMatchesTheReference) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int tensors = 1 + trial % 3;
    std::vector<std::vector<float>> weights;
    std::vector<std::vector<uint32_t>> masks;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<reference::PruneTarget> expected;
    for (int t = 0; t < tensors; ++t) {
      int64_t n = 1 + int64_t(rng() % 300);
      weights.push_back(randomWeights(rng, n));
      masks.push_back(randomMask(rng, n, trial % 2 ? 0.2 : 0.0));
      shapes.push_back({n});
      expected.push_back(referenceTarget(weights[t], masks[t], shapes[t]));
    }
    double sparsity = double(rng() % 100) / 100.0;
    reference::pruneByMagnitude(expected, sparsity);
    std::vector<Target> targets;
    for (int t = 0; t < tensors; ++t)
      targets.push_back(
          {weights[t].data(), masks[t].data(), shapes[t].data(), 1});
    magnitudeMasks(targets.data(), tensors, sparsity);
    for (int t = 0; t < tensors; ++t)
      expectSameMask(masks[t], expected[t],
                     "trial " + std::to_string(trial) + ", tensor " +
                         std::to_string(t));
  }
}

TEST(Prune, StructuredMatchesTheReference) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<int64_t> shape{1 + int64_t(rng() % 6), 1 + int64_t(rng() % 7),
                               1 + int64_t(rng() % 5)};
    int64_t dim = int64_t(rng() % 3), n = shape[0] * shape[1] * shape[2];
    bool l1 = trial % 2;
    std::vector<float> w = randomWeights(rng, n);
    std::vector<uint32_t> mask(maskWords(n), 0);
    reference::PruneTarget expected = referenceTarget(w, mask, shape);
    double sparsity = double(rng() % 100) / 100.0;
    reference::pruneStructured(expected, sparsity, dim, l1);
    Target target{w.data(), mask.data(), shape.data(), 3};
    structuredMasks(target, sparsity, dim, l1);
    expectSameMask(mask, expected, "trial " + std::to_string(trial));
    // Whole slices go.
    int64_t inner = 1;
    for (int64_t d = dim + 1; d < 3; ++d)
      inner *= shape[d];
    for (int64_t e = 0; e < n; ++e)
      ASSERT_EQ(expected.pruned[e],
                expected.pruned[((e / inner) % shape[dim]) * inner]);
  }
}

TEST(Prune, NMMatchesTheReference) {
  std::mt19937 rng(13);
  for (int m : {2, 4, 8, 16, 32})
    for (int n = 1; n < m; n += std::max(1, m / 4)) {
      int64_t count = int64_t(m) * (1 + int64_t(rng() % 40));
      std::vector<float> w = randomWeights(rng, count);
      std::vector<uint32_t> mask = randomMask(rng, count, 0.1);
      reference::PruneTarget expected = referenceTarget(w, mask, {count});
      reference::pruneNofM(expected, n, m);
      int64_t shape[] = {count};
      Target target{w.data(), mask.data(), shape, 1};
      nmMasks(target, n, m);
      expectSameMask(mask, expected,
                     std::to_string(n) + ":" + std::to_string(m));
      // Exactly m - n of every m go.
      for (int64_t g = 0; g < count; g += m) {
        int pruned = 0;
        for (int j = 0; j < m; ++j)
          pruned += expected.pruned[g + j];
        ASSERT_EQ(pruned, m - n);
      }
    }
}

TEST(Prune, ZhuGuptaSchedule) {
  double s = -1;
  // Updates at 100, 200, ..., 1000 (and the end), cubic from 0 to 0.8.
  EXPECT_FALSE(scheduledSparsity(99, 100, 1000, 100, 0.8, &s));
  EXPECT_FALSE(scheduledSparsity(150, 100, 1000, 100, 0.8, &s));
  EXPECT_FALSE(scheduledSparsity(1001, 100, 1000, 100, 0.8, &s));
  ASSERT_TRUE(scheduledSparsity(100, 100, 1000, 100, 0.8, &s));
  EXPECT_EQ(s, 0.0);
  ASSERT_TRUE(scheduledSparsity(550, 100, 1000, 50, 0.8, &s));
  EXPECT_NEAR(s, 0.8 * (1 - 0.125), 1e-12);
  ASSERT_TRUE(scheduledSparsity(1000, 100, 1000, 300, 0.8, &s));
  EXPECT_EQ(s, 0.8); // the end is an update even off the grid
  double previous = -1;
  for (int step = 100; step <= 1000; step += 100) {
    ASSERT_TRUE(scheduledSparsity(step, 100, 1000, 100, 0.8, &s));
    EXPECT_GT(s, previous);
    previous = s;
  }
  // One-shot: at `start`, or at the first step when start is 0.
  EXPECT_TRUE(scheduledSparsity(1, 0, 0, 100, 0.5, &s));
  EXPECT_EQ(s, 0.5);
  EXPECT_FALSE(scheduledSparsity(2, 0, 0, 100, 0.5, &s));
  EXPECT_TRUE(scheduledSparsity(40, 40, 10, 100, 0.5, &s));
  // The reference agrees at every step of assorted schedules (to rounding:
  // pow() against a product of three factors).
  for (int64_t start : {0, 1, 5, 40})
    for (int64_t end : {0, 3, 40, 97})
      for (int64_t every : {1, 7, 100})
        for (int64_t step = 1; step <= 110; ++step) {
          std::optional<double> expected =
              reference::scheduledSparsity(step, start, end, every, 0.9);
          double got = -1;
          ASSERT_EQ(scheduledSparsity(step, start, end, every, 0.9, &got),
                    expected.has_value())
              << start << ".." << end << " every " << every << " at " << step;
          if (expected)
            ASSERT_NEAR(got, *expected, 1e-12);
        }
}

TEST(Prune, CountsRoundHalfToEvenAsPython) {
  // torch.nn.utils.prune prunes round(amount * n) elements, and Python 3
  // rounds half to even.
  for (auto [sparsity, count, python] : {std::tuple{0.5, 5, 2},
                                         {0.5, 7, 4},
                                         {0.25, 10, 2},
                                         {0.75, 10, 8},
                                         {0.3, 10, 3},
                                         {1.0, 9, 9},
                                         {0.0, 9, 0}}) {
    EXPECT_EQ(prunedCount(sparsity, count), python)
        << sparsity << " of " << count;
    EXPECT_EQ(reference::prunedCount(sparsity, count), python);
  }
}

TEST(Prune, ApplyMaskZeroesMarkedElementsOfAnyWidth) {
  uint32_t mask[2] = {0x80000001u, 0x1u};
  std::vector<float> f(33, 1.5f);
  applyMask(33, 4, f.data(), mask, f.data());
  EXPECT_EQ(f[0], 0.0f);
  EXPECT_EQ(f[1], 1.5f);
  EXPECT_EQ(f[31], 0.0f);
  EXPECT_EQ(f[32], 0.0f);
  std::vector<uint8_t> codes(33, 7), out(33, 9);
  applyMask(33, 1, codes.data(), mask, out.data());
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[30], 7);
  EXPECT_EQ(codes[0], 7); // the input is left alone
}

} // namespace
