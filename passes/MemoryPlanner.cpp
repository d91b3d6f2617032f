//===- MemoryPlanner.cpp - Offsets for buffers with known lifetimes -------===//

#include "passes/MemoryPlanner.h"
#include "runtime/Failure.h"

#include <algorithm>
#include <numeric>

using namespace mnemo;

namespace {
bool overlapInTime(const BufferInterval &a, const BufferInterval &b) {
  return a.start <= b.end && b.start <= a.end;
}
} // namespace

int64_t mnemo::lowerBound(const std::vector<BufferInterval> &buffers) {
  // +size when a buffer starts, -size the step after it ends; at equal
  // steps the frees come first.
  std::vector<std::pair<int64_t, int64_t>> events;
  for (const BufferInterval &b : buffers) {
    events.push_back({b.start, b.size});
    events.push_back({b.end + 1, -b.size});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (const auto &[step, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

int64_t mnemo::naiveBytes(const std::vector<BufferInterval> &buffers) {
  int64_t total = 0;
  for (const BufferInterval &b : buffers)
    total += b.size;
  return total;
}

namespace {
std::vector<size_t> greedyOrder(const std::vector<BufferInterval> &buffers,
                                GreedyOrder order) {
  std::vector<size_t> byPriority(buffers.size());
  std::iota(byPriority.begin(), byPriority.end(), 0);
  auto lifetime = [&](size_t i) { return buffers[i].end - buffers[i].start; };
  // Bytes times steps: a buffer that blocks much memory for long goes first.
  auto area = [&](size_t i) { return buffers[i].size * (lifetime(i) + 1); };
  std::stable_sort(
      byPriority.begin(), byPriority.end(), [&](size_t a, size_t b) {
        if (order == GreedyOrder::BySize && buffers[a].size != buffers[b].size)
          return buffers[a].size > buffers[b].size;
        if (order == GreedyOrder::ByArea && area(a) != area(b))
          return area(a) > area(b);
        if (lifetime(a) != lifetime(b))
          return lifetime(a) > lifetime(b);
        return buffers[a].size > buffers[b].size;
      });
  return byPriority;
}
} // namespace

MemoryPlan mnemo::planInOrder(const std::vector<BufferInterval> &buffers,
                              const std::vector<size_t> &order) {
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), -1);
  // The buffers placed so far as (offset, end) in memory, in that order,
  // with each one's index: kept sorted as they are placed, so a placement
  // scans them once instead of sorting its neighbours (a step of thousands
  // of buffers spent most of its planning time in that sort).
  struct Placed {
    int64_t offset, end;
    size_t index;
  };
  std::vector<Placed> placed;
  placed.reserve(order.size());
  for (size_t i : order) {
    const BufferInterval &b = buffers[i];
    // The smallest gap between time-overlapping neighbours that fits;
    // otherwise on top of them all.
    int64_t bestOffset = -1, bestGap = INT64_MAX, top = 0;
    for (const Placed &p : placed) {
      if (!overlapInTime(b, buffers[p.index]))
        continue;
      int64_t gap = p.offset - top;
      if (gap >= b.size && gap < bestGap) {
        bestGap = gap;
        bestOffset = top;
      }
      top = std::max(top, p.end);
    }
    int64_t offset = bestOffset >= 0 ? bestOffset : top;
    plan.offsets[i] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + b.size);
    Placed here{offset, offset + b.size, i};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), here,
                                   [](const Placed &x, const Placed &y) {
                                     return std::pair(x.offset, x.end) <
                                            std::pair(y.offset, y.end);
                                   }),
                  here);
  }
  return plan;
}

MemoryPlan mnemo::planGreedy(const std::vector<BufferInterval> &buffers,
                             GreedyOrder order) {
  MemoryPlan plan = planInOrder(buffers, greedyOrder(buffers, order));
  plan.method = order == GreedyOrder::BySize       ? "greedy-by-size"
                : order == GreedyOrder::ByLifetime ? "greedy-by-lifetime"
                                                   : "greedy-by-area";
  return plan;
}

MemoryPlan
mnemo::improvePlacementOrder(const std::vector<BufferInterval> &buffers,
                             MemoryPlan plan, std::vector<size_t> order,
                             int64_t workLimit) {
  int64_t bound = lowerBound(buffers);
  size_t n = order.size();
  if (n < 2 || plan.arenaBytes <= bound)
    return plan;
  // One placement compares each buffer with those placed before it.
  int64_t workPerPlacement = int64_t(n) * int64_t(n - 1) / 2;
  int64_t placements = workLimit / workPerPlacement;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  bool improved = false;
  for (int64_t tried = 0; tried < placements && plan.arenaBytes > bound;) {
    size_t a = next() % n, b = next() % n;
    if (a == b)
      continue;
    ++tried;
    std::swap(order[a], order[b]);
    MemoryPlan candidate = planInOrder(buffers, order);
    if (candidate.arenaBytes <= plan.arenaBytes) {
      improved |= candidate.arenaBytes < plan.arenaBytes;
      candidate.method = plan.method;
      plan = std::move(candidate);
    } else {
      std::swap(order[a], order[b]);
    }
  }
  if (improved && plan.method.find("local search") == std::string::npos)
    plan.method += " + local search";
  return plan;
}

MemoryPlan mnemo::planHeuristic(const std::vector<BufferInterval> &buffers) {
  // Three cheap orders; each wins on some step functions.
  MemoryPlan best = planGreedy(buffers, GreedyOrder::BySize);
  for (GreedyOrder order : {GreedyOrder::ByLifetime, GreedyOrder::ByArea}) {
    MemoryPlan plan = planGreedy(buffers, order);
    if (plan.arenaBytes < best.arenaBytes)
      best = std::move(plan);
  }
  return best;
}

namespace {
/// Depth-first search over gravity-normal placements. Any optimal plan can
/// be pushed down until every buffer rests at 0 or on a buffer that is live
/// at the same time; placing buffers in increasing offset order, each on the
/// highest time-overlapping buffer placed so far, rebuilds it. So the search
/// picks which buffer to place next and sets its offset that way. Two
/// buffers that are never live together commute, so of two such buffers
/// placed one after the other only the lower index may come first.
class ExactSearch {
public:
  ExactSearch(const std::vector<BufferInterval> &buffers, int64_t nodeLimit)
      : buffers(buffers), nodeLimit(nodeLimit) {
    size_t n = buffers.size();
    overlaps.assign(n, std::vector<bool>(n, false));
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j)
        overlaps[i][j] = i != j && overlapInTime(buffers[i], buffers[j]);
    // Large buffers first: good plans early, so the bound prunes sooner.
    order.resize(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return buffers[a].size > buffers[b].size;
    });
    offsets.assign(n, -1);
    bound = lowerBound(buffers);
  }

  std::optional<MemoryPlan> run(int64_t incumbentBytes,
                                const std::vector<int64_t> &incumbent) {
    best = incumbentBytes;
    bestOffsets = incumbent;
    if (best > bound)
      search(SIZE_MAX, 0, 0);
    if (timedOut)
      return std::nullopt;
    MemoryPlan plan;
    plan.offsets = bestOffsets;
    plan.arenaBytes = best;
    plan.method = "exact";
    return plan;
  }

private:
  void search(size_t last, size_t placedCount, int64_t peak) {
    if (timedOut || best == bound)
      return;
    if (++nodes > nodeLimit) {
      timedOut = true;
      return;
    }
    if (placedCount == buffers.size()) {
      if (peak < best) {
        best = peak;
        bestOffsets = offsets;
      }
      return;
    }
    for (size_t i : order) {
      if (offsets[i] >= 0)
        continue;
      if (last != SIZE_MAX && !overlaps[i][last] && i < last)
        continue; // the other order of this commuting pair is searched
      int64_t offset = 0;
      for (size_t j = 0; j < buffers.size(); ++j)
        if (offsets[j] >= 0 && overlaps[i][j])
          offset = std::max(offset, offsets[j] + buffers[j].size);
      int64_t newPeak = std::max(peak, offset + buffers[i].size);
      if (newPeak >= best)
        continue;
      offsets[i] = offset;
      search(i, placedCount + 1, newPeak);
      offsets[i] = -1;
      if (timedOut || best == bound)
        return;
    }
  }

  const std::vector<BufferInterval> &buffers;
  int64_t nodeLimit;
  std::vector<std::vector<bool>> overlaps;
  std::vector<size_t> order;
  std::vector<int64_t> offsets, bestOffsets;
  int64_t best = 0, bound = 0;
  int64_t nodes = 0;
  bool timedOut = false;
};
} // namespace

std::optional<MemoryPlan>
mnemo::planExact(const std::vector<BufferInterval> &buffers, int64_t nodeLimit,
                 const MemoryPlan *incumbent) {
  MemoryPlan start = incumbent ? *incumbent : planHeuristic(buffers);
  ExactSearch search(buffers, nodeLimit);
  return search.run(start.arenaBytes, start.offsets);
}

bool mnemo::verifyPlan(const std::vector<BufferInterval> &buffers,
                       const MemoryPlan &plan, std::string &error) {
  if (plan.offsets.size() != buffers.size())
    return failWith(error, "the plan has " +
                               std::to_string(plan.offsets.size()) +
                               " offsets for " +
                               std::to_string(buffers.size()) + " buffers");
  for (size_t i = 0; i < buffers.size(); ++i) {
    int64_t offset = plan.offsets[i];
    if (offset < 0 || offset + buffers[i].size > plan.arenaBytes)
      return failWith(error, "buffer " + std::to_string(i) + " at offset " +
                                 std::to_string(offset) +
                                 " does not fit the arena of " +
                                 std::to_string(plan.arenaBytes) + " bytes");
  }
  // Sweep over time in start order; compare each buffer with those still
  // live when it starts.
  std::vector<size_t> byStart(buffers.size());
  std::iota(byStart.begin(), byStart.end(), 0);
  std::sort(byStart.begin(), byStart.end(), [&](size_t a, size_t b) {
    return buffers[a].start < buffers[b].start;
  });
  std::vector<size_t> live;
  for (size_t i : byStart) {
    live.erase(std::remove_if(
                   live.begin(), live.end(),
                   [&](size_t j) { return buffers[j].end < buffers[i].start; }),
               live.end());
    for (size_t j : live) {
      int64_t a0 = plan.offsets[i], a1 = a0 + buffers[i].size;
      int64_t b0 = plan.offsets[j], b1 = b0 + buffers[j].size;
      if (a0 < b1 && b0 < a1 && buffers[i].size > 0 && buffers[j].size > 0)
        return failWith(
            error, "buffers " + std::to_string(j) + " and " +
                       std::to_string(i) + " are live together at step " +
                       std::to_string(buffers[i].start) +
                       " and overlap in memory ([" + std::to_string(b0) + ", " +
                       std::to_string(b1) + ") and [" + std::to_string(a0) +
                       ", " + std::to_string(a1) + "))");
    }
    live.push_back(i);
  }
  return true;
}
