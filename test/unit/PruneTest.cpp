//===- PruneTest.cpp - Pruning masks against a sort-based reference -------===//
//
// runtime/Prune.h selects the elements to prune by radix selection over
// 32-bit keys; here the same choice is made by sorting (magnitude, then
// index), on random tensors full of ties, zeros and earlier masks.
//
//===----------------------------------------------------------------------===//

#include "runtime/Prune.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace mnemo::prune;

namespace {

/// Weights on a coarse grid, so that many magnitudes tie.
std::vector<float> randomWeights(std::mt19937 &rng, int64_t n) {
  std::uniform_int_distribution<int> grid(-6, 6);
  std::vector<float> w(n);
  for (float &x : w)
    x = float(grid(rng)) * 0.25f;
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

/// The k elements that sort first by (pruned before, magnitude, index).
std::vector<bool> smallestK(const std::vector<double> &order, int64_t k) {
  std::vector<int64_t> index(order.size());
  std::iota(index.begin(), index.end(), 0);
  std::stable_sort(index.begin(), index.end(),
                   [&](int64_t a, int64_t b) { return order[a] < order[b]; });
  std::vector<bool> chosen(order.size(), false);
  for (int64_t i = 0; i < k; ++i)
    chosen[index[i]] = true;
  return chosen;
}

TEST(Prune, MagnitudeMatchesSorting) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int tensors = 1 + trial % 3;
    std::vector<std::vector<float>> weights;
    std::vector<std::vector<uint32_t>> masks;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<double> order;
    for (int t = 0; t < tensors; ++t) {
      int64_t n = 1 + int64_t(rng() % 300);
      weights.push_back(randomWeights(rng, n));
      masks.push_back(randomMask(rng, n, trial % 2 ? 0.2 : 0.0));
      shapes.push_back({n});
      for (int64_t i = 0; i < n; ++i)
        order.push_back(bitOf(masks.back().data(), i)
                            ? -1.0
                            : std::fabs(double(weights.back()[i])));
    }
    double sparsity = double(rng() % 100) / 100.0;
    std::vector<bool> expected =
        smallestK(order, prunedCount(sparsity, int64_t(order.size())));
    std::vector<Target> targets;
    for (int t = 0; t < tensors; ++t)
      targets.push_back(
          {weights[t].data(), masks[t].data(), shapes[t].data(), 1});
    magnitudeMasks(targets.data(), tensors, sparsity);
    int64_t flat = 0;
    for (int t = 0; t < tensors; ++t)
      for (int64_t i = 0; i < int64_t(weights[t].size()); ++i, ++flat)
        ASSERT_EQ(bitOf(masks[t].data(), i), expected[flat])
            << "trial " << trial << ", tensor " << t << ", element " << i;
  }
}

TEST(Prune, StructuredPrunesWholeSlicesByNorm) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<int64_t> shape{1 + int64_t(rng() % 6), 1 + int64_t(rng() % 7),
                               1 + int64_t(rng() % 5)};
    int64_t dim = int64_t(rng() % 3), n = shape[0] * shape[1] * shape[2];
    bool l1 = trial % 2;
    std::vector<float> w = randomWeights(rng, n);
    std::vector<uint32_t> mask(maskWords(n), 0);
    int64_t inner = 1, slices = shape[dim];
    for (int64_t d = dim + 1; d < 3; ++d)
      inner *= shape[d];
    std::vector<double> norm(slices, 0.0);
    for (int64_t e = 0; e < n; ++e)
      norm[(e / inner) % slices] +=
          l1 ? std::fabs(double(w[e])) : double(w[e]) * double(w[e]);
    std::vector<double> order(slices);
    for (int64_t s = 0; s < slices; ++s)
      order[s] = double(float(norm[s]));
    double sparsity = double(rng() % 100) / 100.0;
    std::vector<bool> expected =
        smallestK(order, prunedCount(sparsity, slices));
    Target target{w.data(), mask.data(), shape.data(), 3};
    structuredMasks(target, sparsity, dim, l1);
    for (int64_t e = 0; e < n; ++e)
      ASSERT_EQ(bitOf(mask.data(), e), expected[(e / inner) % slices])
          << "trial " << trial << ", element " << e;
  }
}

TEST(Prune, NMKeepsTheLargestNOfEveryM) {
  std::mt19937 rng(13);
  for (int m : {2, 4, 8, 16, 32})
    for (int n = 1; n < m; n += std::max(1, m / 4)) {
      int64_t count = int64_t(m) * (1 + int64_t(rng() % 40));
      std::vector<float> w = randomWeights(rng, count);
      std::vector<uint32_t> mask = randomMask(rng, count, 0.1);
      std::vector<uint32_t> before = mask;
      int64_t shape[] = {count};
      Target target{w.data(), mask.data(), shape, 1};
      nmMasks(target, n, m);
      for (int64_t g = 0; g < count; g += m) {
        std::vector<double> order(m);
        for (int j = 0; j < m; ++j)
          order[j] =
              bitOf(before.data(), g + j) ? -1.0 : std::fabs(double(w[g + j]));
        std::vector<bool> expected = smallestK(order, m - n);
        for (int j = 0; j < m; ++j)
          ASSERT_EQ(bitOf(mask.data(), g + j), expected[j])
              << m << ":" << n << " group at " << g;
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
  EXPECT_EQ(prunedCount(0.5, 5), 3); // round half away from zero
  EXPECT_EQ(prunedCount(0.3, 10), 3);
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
