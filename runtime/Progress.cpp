//===- Progress.cpp - The trainer's progress display ----------------------===//

#include "runtime/Progress.h"

#include <algorithm>
#include <cstdio>
#include <unistd.h>

namespace mnemo::runtime {

namespace {
std::string duration(double seconds) {
  int64_t s = int64_t(seconds + 0.5);
  char buffer[32];
  if (s >= 3600)
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld:%02lld",
                  (long long)(s / 3600), (long long)(s / 60 % 60),
                  (long long)(s % 60));
  else
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld", (long long)(s / 60),
                  (long long)(s % 60));
  return buffer;
}
} // namespace

Progress::Progress(int64_t firstStep, int64_t totalSteps, int64_t stepsPerEpoch,
                   int64_t examplesPerStep, bool quiet)
    : firstStep(firstStep), totalSteps(totalSteps),
      stepsPerEpoch(std::max<int64_t>(1, stepsPerEpoch)),
      examplesPerStep(examplesPerStep), terminal(isatty(STDOUT_FILENO) != 0),
      quiet(quiet), start(std::chrono::steady_clock::now()), lastDraw(start) {}

double Progress::examplesPerSecond() const {
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  int64_t done = lastStep - firstStep + 1;
  return seconds > 0 && done > 0 ? double(done * examplesPerStep) / seconds : 0;
}

void Progress::update(int64_t step, double loss) {
  lastStep = step;
  // A smoothed loss reads better than one batch's.
  smoothedLoss = hasLoss ? 0.9 * smoothedLoss + 0.1 * loss : loss;
  hasLoss = true;
  draw(step, step == totalSteps);
}

void Progress::draw(int64_t step, bool force) {
  if (quiet)
    return;
  auto now = std::chrono::steady_clock::now();
  double elapsed = std::chrono::duration<double>(now - start).count();
  int64_t done = step - firstStep + 1;
  double eta =
      done > 0 ? elapsed / double(done) * double(totalSteps - step) : 0;
  int64_t epoch = (step - 1) / stepsPerEpoch + 1;
  int64_t epochs = (totalSteps + stepsPerEpoch - 1) / stepsPerEpoch;
  int64_t within = (step - 1) % stepsPerEpoch + 1;
  int64_t inEpoch =
      std::min(stepsPerEpoch, totalSteps - (epoch - 1) * stepsPerEpoch);
  if (terminal) {
    if (!force && std::chrono::duration<double>(now - lastDraw).count() < 0.1)
      return;
    lastDraw = now;
    const int width = 20;
    int filled = int(double(width) * double(within) / double(inEpoch));
    std::string bar(filled, '#');
    bar += std::string(width - filled, '.');
    std::printf("\r\033[Kepoch %lld/%lld  [%s]  step %lld/%lld  loss %.4f  "
                "%.0f ex/s  ETA %s",
                (long long)epoch, (long long)epochs, bar.c_str(),
                (long long)within, (long long)inEpoch, smoothedLoss,
                examplesPerSecond(), duration(eta).c_str());
    std::fflush(stdout);
    lineShown = true;
    return;
  }
  // Plain lines: about twenty per run, and the last step.
  int64_t every = std::max<int64_t>(1, (totalSteps - firstStep + 1) / 20);
  if (!force && step - lastPlainStep < every)
    return;
  lastPlainStep = step;
  std::printf("epoch %lld/%lld  step %lld/%lld  loss %.4f  %.0f ex/s  ETA %s\n",
              (long long)epoch, (long long)epochs, (long long)within,
              (long long)inEpoch, smoothedLoss, examplesPerSecond(),
              duration(eta).c_str());
  std::fflush(stdout);
}

void Progress::print(const std::string &line) {
  if (terminal && lineShown)
    std::printf("\r\033[K");
  std::printf("%s\n", line.c_str());
  lineShown = false;
  if (lastStep > 0 && lastStep < totalSteps)
    draw(lastStep, true);
  std::fflush(stdout);
}

void Progress::finish() {
  if (terminal && lineShown && !quiet)
    std::printf("\r\033[K");
  lineShown = false;
  std::fflush(stdout);
}

} // namespace mnemo::runtime
