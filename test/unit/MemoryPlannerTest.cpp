//===- MemoryPlannerTest.cpp - Offset planning on hand-made interval sets -===//

#include "passes/MemoryPlanner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

using namespace mnemo;

namespace {
using Buffers = std::vector<BufferInterval>;

/// The optimum by brute force: every order of placement, each buffer on
/// the highest time-overlapping buffer placed before it (which reaches
/// every gravity-normal plan, so the minimum is optimal). Independent of
/// planExact's search and pruning.
int64_t bruteForceOptimum(const Buffers &buffers) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  int64_t best = INT64_MAX;
  do {
    std::vector<int64_t> offsets(buffers.size(), -1);
    int64_t arena = 0;
    for (size_t i : order) {
      int64_t offset = 0;
      for (size_t j = 0; j < buffers.size(); ++j)
        if (offsets[j] >= 0 && buffers[i].start <= buffers[j].end &&
            buffers[j].start <= buffers[i].end)
          offset = std::max(offset, offsets[j] + buffers[j].size);
      offsets[i] = offset;
      arena = std::max(arena, offset + buffers[i].size);
    }
    best = std::min(best, arena);
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

void expectValid(const Buffers &buffers, const MemoryPlan &plan) {
  std::string error;
  EXPECT_TRUE(verifyPlan(buffers, plan, error)) << plan.method << ": " << error;
  EXPECT_GE(plan.arenaBytes, lowerBound(buffers)) << plan.method;
}

Buffers randomInstance(std::mt19937 &rng, int n) {
  Buffers buffers;
  std::uniform_int_distribution<int64_t> start(0, 12), length(0, 6), size(1, 8);
  for (int i = 0; i < n; ++i) {
    int64_t s = start(rng);
    buffers.push_back({s, s + length(rng), size(rng) * 256});
  }
  return buffers;
}
} // namespace

TEST(MemoryPlanner, LowerBoundAndNaive) {
  Buffers buffers = {{0, 2, 100}, {1, 3, 50}, {3, 4, 70}, {5, 5, 10}};
  EXPECT_EQ(lowerBound(buffers), 150); // steps 1-2: 100 + 50
  EXPECT_EQ(naiveBytes(buffers), 230);
  EXPECT_EQ(lowerBound({}), 0);
}

TEST(MemoryPlanner, DisjointLifetimesShareMemory) {
  Buffers chain = {{0, 1, 512}, {2, 3, 256}, {4, 5, 768}, {6, 6, 256}};
  for (const MemoryPlan &plan : {planGreedy(chain, GreedyOrder::BySize),
                                 planGreedy(chain, GreedyOrder::ByLifetime),
                                 *planExact(chain, 1000000)}) {
    expectValid(chain, plan);
    EXPECT_EQ(plan.arenaBytes, 768) << plan.method;
  }
}

TEST(MemoryPlanner, AllLiveTogetherNeedTheSum) {
  Buffers together = {{0, 9, 256}, {0, 9, 512}, {3, 9, 1024}};
  MemoryPlan plan = planHeuristic(together);
  expectValid(together, plan);
  EXPECT_EQ(plan.arenaBytes, 1792);
}

TEST(MemoryPlanner, BestFitFillsTheSmallestGap) {
  // A and B sit at [0, 256) and [512, 1024) around a 256-byte hole left by
  // C; D (256 bytes, live with A and B) belongs in the hole, not on top.
  Buffers buffers = {{0, 9, 256}, {2, 9, 512}, {0, 1, 256}, {3, 9, 256}};
  MemoryPlan plan = planGreedy(buffers, GreedyOrder::BySize);
  expectValid(buffers, plan);
  EXPECT_EQ(plan.arenaBytes, lowerBound(buffers));
}

TEST(MemoryPlanner, GreedyIsSuboptimalWhereTheExactSearchIsNot) {
  // Found by a random search: both greedy orders need 1792 bytes, while the
  // exact search finds a plan at the lower bound, 1536.
  Buffers buffers = {{2, 3, 256}, {5, 7, 1024}, {2, 2, 1024},
                     {3, 6, 512}, {1, 1, 256},  {3, 3, 512}};
  MemoryPlan greedy = planHeuristic(buffers);
  std::optional<MemoryPlan> exact = planExact(buffers, 10000000);
  ASSERT_TRUE(exact);
  expectValid(buffers, greedy);
  expectValid(buffers, *exact);
  EXPECT_EQ(greedy.arenaBytes, 1792);
  EXPECT_EQ(exact->arenaBytes, 1536);
  EXPECT_EQ(exact->arenaBytes, lowerBound(buffers));
  EXPECT_EQ(exact->arenaBytes, bruteForceOptimum(buffers));
}

TEST(MemoryPlanner, ExactMatchesBruteForceOnRandomInstances) {
  std::mt19937 rng(2026);
  int greedyWorse = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Buffers buffers = randomInstance(rng, 2 + trial % 6);
    MemoryPlan heuristic = planHeuristic(buffers);
    std::optional<MemoryPlan> exact = planExact(buffers, 10000000);
    ASSERT_TRUE(exact);
    expectValid(buffers, heuristic);
    expectValid(buffers, *exact);
    EXPECT_EQ(exact->arenaBytes, bruteForceOptimum(buffers))
        << "trial " << trial;
    EXPECT_LE(exact->arenaBytes, heuristic.arenaBytes);
    greedyWorse += exact->arenaBytes < heuristic.arenaBytes;
  }
  // The comparison is only meaningful if greedy sometimes loses.
  EXPECT_GT(greedyWorse, 0);
}

TEST(MemoryPlanner, ExactGivesUpAtItsNodeLimit) {
  std::mt19937 rng(7);
  Buffers buffers = randomInstance(rng, 200);
  EXPECT_FALSE(planExact(buffers, 1000));
}

TEST(MemoryPlanner, LocalSearchIsAFunctionOfItsInput) {
  // Host code and CUDA kernels come from separate compilations and must get
  // the same offsets: the search is bounded by work, never by time.
  std::mt19937 rng(11);
  Buffers buffers = randomInstance(rng, 300);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  MemoryPlan start = planInOrder(buffers, order);
  MemoryPlan first = improvePlacementOrder(buffers, start, order, 20000000);
  MemoryPlan second = improvePlacementOrder(buffers, start, order, 20000000);
  EXPECT_EQ(first.offsets, second.offsets);
  EXPECT_EQ(first.arenaBytes, second.arenaBytes);
}

TEST(MemoryPlanner, VerifyCatchesOverlaps) {
  Buffers buffers = {{0, 3, 256}, {2, 5, 256}};
  MemoryPlan bad{{0, 128}, 512, "hand-made"};
  std::string error;
  EXPECT_FALSE(verifyPlan(buffers, bad, error));
  EXPECT_NE(error.find("live together at step 2"), std::string::npos) << error;
  MemoryPlan tooSmall{{0, 256}, 300, "hand-made"};
  EXPECT_FALSE(verifyPlan(buffers, tooSmall, error));
  MemoryPlan good{{0, 256}, 512, "hand-made"};
  EXPECT_TRUE(verifyPlan(buffers, good, error)) << error;
}

TEST(MemoryPlanner, LargeInstancesPlanQuickly) {
  std::mt19937 rng(3);
  Buffers buffers;
  std::uniform_int_distribution<int64_t> start(0, 5000), length(0, 300),
      size(1, 4096);
  for (int i = 0; i < 5000; ++i) {
    int64_t s = start(rng);
    buffers.push_back({s, s + length(rng), size(rng) * 256});
  }
  MemoryPlan plan = planHeuristic(buffers);
  expectValid(buffers, plan);
  EXPECT_LE(plan.arenaBytes, lowerBound(buffers) * 13 / 10);
}

TEST(MemoryPlanner, LocalSearchReachesTheBoundWhereTheGreedyOrdersDoNot) {
  // Found by a random search: every greedy order needs 9 units (of 256
  // bytes), while some placement order meets the lower bound, 8.
  Buffers buffers = {{6, 6, 768}, {0, 2, 1024}, {2, 3, 256},
                     {1, 3, 512}, {3, 4, 512},  {3, 4, 768}};
  MemoryPlan greedy = planHeuristic(buffers);
  EXPECT_EQ(greedy.arenaBytes, 9 * 256);
  std::vector<size_t> order = {0, 1, 2, 3, 4, 5};
  MemoryPlan start = planInOrder(buffers, order);
  MemoryPlan searched = improvePlacementOrder(buffers, start, order, 100000000);
  expectValid(buffers, searched);
  EXPECT_EQ(searched.arenaBytes, lowerBound(buffers));
  EXPECT_EQ(lowerBound(buffers), 8 * 256);
}
