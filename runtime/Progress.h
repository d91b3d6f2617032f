//===- Progress.h - The trainer's progress display --------------*- C++ -*-===//
//
// On a terminal, one live line redrawn at most ten times a second:
//
//   epoch 1/5  [#########.........]  step 212/469  loss 0.5123  8123 ex/s  ETA
//   0:31
//
// When the output is not a terminal (a log file, CI), plain lines at a
// steady rate instead, so logs stay readable.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_PROGRESS_H
#define MNEMO_RUNTIME_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <string>

namespace mnemo::runtime {

class Progress {
public:
  Progress(int64_t firstStep, int64_t totalSteps, int64_t stepsPerEpoch,
           int64_t examplesPerStep, bool quiet);

  /// After each step (counting from 1).
  void update(int64_t step, double loss);
  /// A line of its own (an epoch summary, evaluation results), printed
  /// above the live line.
  void print(const std::string &line);
  /// Clears the live line at the end.
  void finish();

  double examplesPerSecond() const;

private:
  void draw(int64_t step, bool force);

  int64_t firstStep, totalSteps, stepsPerEpoch, examplesPerStep;
  bool terminal, quiet;
  std::chrono::steady_clock::time_point start, lastDraw;
  int64_t lastStep = 0, lastPlainStep = 0;
  double smoothedLoss = 0;
  bool hasLoss = false, lineShown = false;
};

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_PROGRESS_H
