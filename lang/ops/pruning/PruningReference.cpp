//===- PruningReference.cpp - The interpreter's own pruning rules ---------===//

#include "lang/ops/pruning/PruningReference.h"

#include <algorithm>
#include <cmath>

using namespace mnemo;
using namespace mnemo::reference;

std::optional<double> reference::scheduledSparsity(int64_t step, int64_t start,
                                                   int64_t end, int64_t every,
                                                   double finalSparsity) {
  int64_t first = std::max<int64_t>(start, 1);
  int64_t last = std::max(end, first);
  if (step < first || step > last)
    return std::nullopt;
  bool onSchedule = (step - first) % every == 0 || step == last;
  if (!onSchedule)
    return std::nullopt;
  if (last == first)
    return finalSparsity;
  double progress = double(step - first) / double(last - first);
  return finalSparsity * (1.0 - std::pow(1.0 - progress, 3));
}

int64_t reference::prunedCount(double sparsity, int64_t count) {
  // std::nearbyint rounds half to even in the default rounding mode, as
  // Python's round() does.
  double rounded = std::nearbyint(sparsity * double(count));
  return std::clamp<int64_t>(int64_t(rounded), 0, count);
}

namespace {
/// What decides an element's (or a slice's) turn to be pruned: those
/// pruned before go first, then the smaller magnitude, NaN last; equal
/// candidates go in index order (the sort is stable).
struct Candidate {
  bool prunedBefore;
  float magnitude;
  int64_t index;
};

bool goesBefore(const Candidate &a, const Candidate &b) {
  if (a.prunedBefore != b.prunedBefore)
    return a.prunedBefore;
  if (a.prunedBefore)
    return false;
  bool aNan = std::isnan(a.magnitude), bNan = std::isnan(b.magnitude);
  if (aNan || bNan)
    return !aNan && bNan;
  return a.magnitude < b.magnitude;
}

/// The indices of the `k` first candidates.
std::vector<int64_t> firstCandidates(std::vector<Candidate> candidates,
                                     int64_t k) {
  std::stable_sort(candidates.begin(), candidates.end(), goesBefore);
  std::vector<int64_t> chosen;
  for (int64_t i = 0; i < k && i < int64_t(candidates.size()); ++i)
    chosen.push_back(candidates[i].index);
  return chosen;
}
} // namespace

void reference::pruneByMagnitude(std::vector<PruneTarget> &targets,
                                 double sparsity) {
  // One pool: candidate i is element i of the targets laid end to end.
  std::vector<Candidate> pool;
  for (const PruneTarget &t : targets)
    for (size_t e = 0; e < t.weight.size(); ++e)
      pool.push_back({bool(t.pruned[e]), std::fabs(float(t.weight[e])),
                      int64_t(pool.size())});
  std::vector<int64_t> chosen =
      firstCandidates(pool, prunedCount(sparsity, int64_t(pool.size())));
  std::vector<bool> prunedInPool(pool.size(), false);
  for (int64_t i : chosen)
    prunedInPool[i] = true;
  size_t offset = 0;
  for (PruneTarget &t : targets) {
    for (size_t e = 0; e < t.weight.size(); ++e)
      t.pruned[e] = prunedInPool[offset + e];
    offset += t.weight.size();
  }
}

void reference::pruneStructured(PruneTarget &target, double sparsity,
                                int64_t dim, bool l1) {
  int64_t slices = target.shape[dim], inner = 1;
  for (size_t d = dim + 1; d < target.shape.size(); ++d)
    inner *= target.shape[d];
  int64_t n = int64_t(target.weight.size());
  auto sliceOf = [&](int64_t e) { return (e / inner) % slices; };
  // The norm (squared for L2: the same order) of each slice, accumulated in
  // double in index order and ranked as an f32 value.
  std::vector<double> norm(slices, 0.0);
  for (int64_t e = 0; e < n; ++e) {
    double v = float(target.weight[e]);
    norm[sliceOf(e)] += l1 ? std::fabs(v) : v * v;
  }
  std::vector<Candidate> candidates;
  for (int64_t s = 0; s < slices; ++s)
    candidates.push_back({bool(target.pruned[s * inner]), float(norm[s]), s});
  std::vector<bool> slicePruned(slices, false);
  for (int64_t s : firstCandidates(candidates, prunedCount(sparsity, slices)))
    slicePruned[s] = true;
  for (int64_t e = 0; e < n; ++e)
    target.pruned[e] = slicePruned[sliceOf(e)];
}

void reference::pruneNofM(PruneTarget &target, int n, int m) {
  int64_t count = int64_t(target.weight.size());
  for (int64_t group = 0; group < count; group += m) {
    std::vector<Candidate> members;
    for (int64_t e = group; e < std::min<int64_t>(count, group + m); ++e)
      members.push_back(
          {bool(target.pruned[e]), std::fabs(float(target.weight[e])), e});
    for (int64_t e = group; e < std::min<int64_t>(count, group + m); ++e)
      target.pruned[e] = false;
    for (int64_t e : firstCandidates(members, m - n))
      target.pruned[e] = true;
  }
}
