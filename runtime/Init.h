//===- Init.h - Parameter initializers --------------------------*- C++ -*-===//
//
// The initializers of the language (zeros, normal, xavier_uniform, ...)
// with PyTorch's formulas for fans and gains, driven by a seeded generator
// whose output is the same on every platform (std:: distributions are not).
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_INIT_H
#define MNEMO_RUNTIME_INIT_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mnemo::runtime {

/// A reproducible generator: splitmix64 over a counter.
class Rng {
public:
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next();
  /// Uniform in [0, 1), 53 bits.
  double uniform();
  /// Standard normal (Box-Muller).
  double normal();

private:
  uint64_t state;
  bool hasSpare = false;
  double spare = 0;
};

/// An initializer as the compiler records it: `kind` and its arguments
/// (numbers, and the symbols mode and nonlinearity).
struct InitSpec {
  std::string kind;
  std::map<std::string, double> numbers;
  std::map<std::string, std::string> symbols;
};

/// The initializer the compiler recorded for a tensor (ArgumentInfo::init,
/// JSON: {"kind": "normal", "std": 0.02, ...}); zeros when none.
InitSpec initSpecOf(const std::string &json);

/// Fills `out` (the shape's element count) per `spec`. Returns false with
/// `error` for an unknown kind or a shape it does not apply to.
bool initialize(const InitSpec &spec, const std::vector<int64_t> &shape,
                Rng &rng, std::vector<float> &out, std::string &error);
/// The same, into `data` (the shape's element count) in place: the trainer
/// initializes in the plan's memory, so that its largest parameter (a
/// GPT-2 embedding, 147 MiB) is not first built in a temporary the size of
/// it.
bool initialize(const InitSpec &spec, const std::vector<int64_t> &shape,
                Rng &rng, float *data, std::string &error);

/// A generator for one named tensor: the run's seed mixed with the name,
/// so adding a parameter does not change the others' initial values.
Rng rngFor(uint64_t seed, const std::string &name);

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_INIT_H
