//===- StepProfile.cpp - Where a training step's time goes ----------------===//

#include "runtime/StepProfile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace mnemo::runtime;

namespace {

/// At most this many lines in each of the two lists.
constexpr int kMaxLines = 12;

void printLine(double seconds, double total, int64_t steps, const char *what) {
  std::printf("  %9.3f  %5.1f%%  %s\n", 1000 * seconds / double(steps),
              100 * seconds / total, what);
}

} // namespace

void mnemo::runtime::printStepProfile(const double *opSeconds,
                                      const char *const *opNames, int numOps,
                                      int64_t profiledSteps) {
  double total = 0;
  for (int i = 0; i < numOps; ++i)
    total += opSeconds[i];
  std::printf("profile: %.3f ms per step in %d ops (%lld steps)\n",
              1000 * total / double(profiledSteps), numOps,
              (long long)profiledSteps);
  std::printf("  %9s  %6s  %s\n", "ms/step", "share", "op");
  // Ops by total time, the largest first: those that make up 90% of the
  // step.
  std::vector<int> order(numOps);
  for (int i = 0; i < numOps; ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return opSeconds[a] > opSeconds[b]; });
  double shown = 0;
  int lines = 0;
  for (int i : order) {
    if (shown > 0.9 * total || ++lines > kMaxLines)
      break;
    shown += opSeconds[i];
    printLine(opSeconds[i], total, profiledSteps, opNames[i]);
  }
  // The same time by kind of op (an op's name ends with its kind, as
  // mnemo.conv2d_weight_grad): where a model's step goes, when no one op
  // stands out (ResNet-18's 291 ops are at most 2.3% each).
  std::map<std::string, double> byKind;
  for (int i = 0; i < numOps; ++i) {
    std::string name = opNames[i];
    size_t space = name.rfind(' ');
    byKind[space == std::string::npos ? name : name.substr(space + 1)] +=
        opSeconds[i];
  }
  std::vector<std::pair<std::string, double>> kinds(byKind.begin(),
                                                    byKind.end());
  std::sort(kinds.begin(), kinds.end(),
            [](const auto &a, const auto &b) { return a.second > b.second; });
  std::printf("  by kind:\n");
  lines = 0;
  for (const auto &[kind, seconds] : kinds) {
    if (++lines > kMaxLines)
      break;
    printLine(seconds, total, profiledSteps, kind.c_str());
  }
}
