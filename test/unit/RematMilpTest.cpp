//===- RematMilpTest.cpp - The recomputation MILP against brute force -----===//
//
// The MILP's optimum must equal the cheapest choice found by trying every
// subset of candidates under the same model (evaluateRemat), on hand-made
// and random steps. Independent of CBC: the brute force only evaluates.
//
//===----------------------------------------------------------------------===//

#include "passes/RematMilp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace mnemo;

namespace {

/// The cheapest choice that fits, or -1 when none does.
int64_t bruteForceFlops(const RematProblem &p) {
  std::vector<int> candidates;
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].candidate)
      candidates.push_back(int(v));
  int64_t best = -1;
  for (uint32_t mask = 0; mask < (1u << candidates.size()); ++mask) {
    std::vector<bool> recompute(p.values.size(), false);
    for (size_t i = 0; i < candidates.size(); ++i)
      recompute[candidates[i]] = (mask >> i) & 1;
    RematCost cost = evaluateRemat(p, recompute);
    if (cost.peak() <= p.capacity && (best < 0 || cost.flops < best))
      best = cost.flops;
  }
  return best;
}

/// A chain of `n` forward ops, each reading the one before; the backward
/// reads them in reverse, one op each. Value i is defined at op i.
RematProblem chain(int n, const std::vector<int64_t> &bytes,
                   const std::vector<int64_t> &flops) {
  RematProblem p;
  int ops = 2 * n;
  p.fixedBytes.assign(ops, 0);
  for (int i = 0; i < n; ++i) {
    RematValue v;
    v.bytes = bytes[i];
    v.flops = flops[i];
    v.defined = i;
    v.lastForwardUse = i + 1 < n ? i + 1 : i;
    v.candidate = true;
    v.firstBackwardUse = v.lastBackwardUse = ops - 1 - i;
    if (i > 0)
      v.operands = {i - 1};
    p.values.push_back(v);
  }
  // Each value is alive from its definition to its last forward use.
  for (int i = 0; i < n; ++i)
    for (int t = i; t <= p.values[i].lastForwardUse; ++t)
      p.fixedBytes[t] += bytes[i];
  for (int i = 0; i < n; ++i)
    p.fixedBytes[ops - 1 - i] += bytes[i];
  return p;
}

TEST(RematMilp, NothingRecomputedWhenItFits) {
  RematProblem p = chain(4, {10, 10, 10, 10}, {1, 1, 1, 1});
  p.capacity = evaluateRemat(p, std::vector<bool>(4, false)).peak();
  RematSolution s;
  std::string error;
  ASSERT_TRUE(solveRematMilp(p, 10, s, error)) << error;
  EXPECT_EQ(s.recomputedFlops, 0);
  EXPECT_TRUE(s.provedOptimal);
}

TEST(RematMilp, ChainRecomputesItsOperandsWhenTheyAreNotKept) {
  // Recomputing value 2 at its backward use reads value 1: kept, it stays
  // alive; recomputed too, it is cloned then as well.
  RematProblem p = chain(3, {8, 8, 8}, {5, 7, 11});
  std::vector<bool> both = {false, true, true};
  RematCost cost = evaluateRemat(p, both);
  EXPECT_EQ(cost.flops, 7 + 11);
  // Op 3 (the first backward op) reads value 2's clone, which needs value
  // 1's clone, which reads value 0 (kept): 8 * 3 bytes.
  EXPECT_EQ(cost.bytes[3], 24);
}

TEST(RematMilp, ImpossibleCapacityIsAnError) {
  RematProblem p = chain(3, {8, 8, 8}, {5, 7, 11});
  p.capacity = 4;
  RematSolution s;
  std::string error;
  EXPECT_FALSE(solveRematMilp(p, 10, s, error));
  EXPECT_FALSE(error.empty());
}

/// An unrolled recurrence of `n` forward values: value i reads value i-1
/// and value i-period (the previous step's state); every third value is
/// not read by the backward.
RematProblem recurrence(int n, int period) {
  RematProblem p;
  int ops = 2 * n;
  p.fixedBytes.assign(ops, 0);
  for (int i = 0; i < n; ++i) {
    RematValue v;
    v.bytes = 1024 * (1 + i % 3);
    v.flops = 1 + i % 7;
    v.defined = i;
    v.lastForwardUse = std::min(n - 1, i + period);
    v.candidate = i % 3 != 2;
    v.firstBackwardUse = v.lastBackwardUse = v.candidate ? ops - 1 - i : 0;
    if (i > 0)
      v.operands.push_back(i - 1);
    if (i >= period)
      v.operands.push_back(i - period);
    p.values.push_back(v);
    for (int t = i; t <= v.lastForwardUse; ++t)
      p.fixedBytes[t] += v.bytes;
    if (v.candidate)
      p.fixedBytes[ops - 1 - i] += v.bytes;
  }
  return p;
}

TEST(RematMilp, TimeLimitHoldsThroughTheRootRelaxation) {
  // 328,000 columns and 813,000 rows, like an unrolled LSTM's program. CBC
  // stops its branch and bound at the limit but not the LP relaxation at
  // its root: under a limit of 0.5 s, CBC ran for a minute here before it
  // ran in a child that the compiler stops past the limit (+10%, +2 s).
  // The solver's time is the property under test, not a speed; building
  // the program and the greedy start, which depend on the machine's load,
  // are not in it. 10 s leaves 4 times the deadline for stopping the child.
  RematProblem p = recurrence(700, 10);
  p.capacity =
      evaluateRemat(p, std::vector<bool>(p.values.size(), false)).peak() * 7 /
      10;
  RematSolution s;
  std::string error;
  bool solved = solveRematMilp(p, 0.5, s, error);
  EXPECT_LT(s.solverSeconds, 10);
  // Where a fast machine finishes the relaxation in time, CBC's own limit
  // stops the search with the greedy's start or better.
  if (!solved)
    EXPECT_NE(error.find("within the time limit"), std::string::npos) << error;
  else
    EXPECT_LE(s.modelPeak, p.capacity);
}

TEST(RematMilp, MatchesBruteForceOnRandomSteps) {
  std::mt19937 rng(7);
  int solved = 0, recomputing = 0;
  for (int trial = 0; trial < 200; ++trial) {
    // A random forward DAG of up to 10 values, some read by a backward of
    // random order; some forward values are not candidates.
    int n = 4 + int(rng() % 7);
    RematProblem p;
      int ops = 2 * n;
    p.fixedBytes.assign(ops, 0);
    for (int i = 0; i < n; ++i) {
      RematValue v;
      v.bytes = 1 + rng() % 64;
      v.flops = 1 + rng() % 100;
      v.defined = i;
      for (int j = 0; j < i; ++j)
        if (rng() % 3 == 0 || j == i - 1)
          v.operands.push_back(j);
      p.values.push_back(v);
    }
    for (int i = 0; i < n; ++i) {
      RematValue &v = p.values[i];
      v.lastForwardUse = i;
      for (int j = i + 1; j < n; ++j)
        for (int o : p.values[j].operands)
          if (o == i)
            v.lastForwardUse = j;
      v.candidate = rng() % 4 != 0;
      if (v.candidate) {
        int a = n + int(rng() % n), b = n + int(rng() % n);
        v.firstBackwardUse = std::min(a, b);
        v.lastBackwardUse = std::max(a, b);
        for (int t = v.firstBackwardUse; t <= v.lastBackwardUse; ++t)
          p.fixedBytes[t] += v.bytes;
      }
      for (int t = i; t <= v.lastForwardUse; ++t)
        p.fixedBytes[t] += v.bytes;
    }
    for (int t = n; t < ops; ++t)
      p.fixedBytes[t] += rng() % 32; // gradients
    std::vector<bool> none(n, false), all(n, false);
    for (int i = 0; i < n; ++i)
      all[i] = p.values[i].candidate;
    int64_t high = evaluateRemat(p, none).peak();
    int64_t low = std::min(high, evaluateRemat(p, all).peak());
    // Mostly tight capacities: the lower half of what is reachable.
    p.capacity = low + int64_t(rng() % uint32_t((high - low) / 2 + 1));
    int64_t expected = bruteForceFlops(p);
    RematSolution s;
    std::string error;
    bool ok = solveRematMilp(p, 30, s, error);
    ASSERT_EQ(ok, expected >= 0) << "trial " << trial << ": " << error;
    if (!ok)
      continue;
    ++solved;
    recomputing += expected > 0;
    EXPECT_TRUE(s.provedOptimal);
    EXPECT_EQ(s.recomputedFlops, expected) << "trial " << trial;
    EXPECT_LE(s.modelPeak, p.capacity) << "trial " << trial;
  }
  EXPECT_GT(solved, 100);
  EXPECT_GT(recomputing, 40); // the test exercises recomputation
}

} // namespace
