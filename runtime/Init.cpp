//===- Init.cpp - Parameter initializers ----------------------------------===//

#include "runtime/Init.h"

#include <cmath>

using namespace mnemo::runtime;

uint64_t Rng::next() {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  if (hasSpare) {
    hasSpare = false;
    return spare;
  }
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300)
    u1 = 1e-300;
  double radius = std::sqrt(-2.0 * std::log(u1));
  spare = radius * std::sin(2.0 * M_PI * u2);
  hasSpare = true;
  return radius * std::cos(2.0 * M_PI * u2);
}

Rng mnemo::runtime::rngFor(uint64_t seed, const std::string &name) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (char c : name)
    h = (h ^ uint8_t(c)) * 1099511628211ull;
  Rng mixer(seed ^ h);
  return Rng(mixer.next());
}

/// torch.nn.init.calculate_gain.
static double gain(const std::string &nonlinearity, double a) {
  if (nonlinearity == "relu")
    return std::sqrt(2.0);
  if (nonlinearity == "tanh")
    return 5.0 / 3.0;
  if (nonlinearity == "leaky_relu")
    return std::sqrt(2.0 / (1.0 + a * a));
  return 1.0; // linear, sigmoid
}

bool mnemo::runtime::initialize(const InitSpec &spec,
                                const std::vector<int64_t> &shape, Rng &rng,
                                std::vector<float> &values,
                                std::string &error) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  values.assign(count, 0.0f);
  return initialize(spec, shape, rng, values.data(), error);
}

bool mnemo::runtime::initialize(const InitSpec &spec,
                                const std::vector<int64_t> &shape, Rng &rng,
                                float *data, std::string &error) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  struct Span {
    float *first, *last;
    float *begin() const { return first; }
    float *end() const { return last; }
  } out{data, data + count};
  for (float &x : out)
    x = 0.0f;
  auto num = [&](const char *key, double fallback) {
    auto it = spec.numbers.find(key);
    return it == spec.numbers.end() ? fallback : it->second;
  };
  auto sym = [&](const char *key, const char *fallback) {
    auto it = spec.symbols.find(key);
    return it == spec.symbols.end() ? std::string(fallback) : it->second;
  };
  // Fans as torch.nn.init._calculate_fan_in_and_fan_out: dim 1 is the
  // input, dim 0 the output, the rest the receptive field.
  double fanIn = 0, fanOut = 0;
  if (shape.size() >= 2) {
    double receptive = 1;
    for (size_t i = 2; i < shape.size(); ++i)
      receptive *= double(shape[i]);
    fanIn = double(shape[1]) * receptive;
    fanOut = double(shape[0]) * receptive;
  }
  bool needsFans =
      spec.kind.rfind("xavier", 0) == 0 || spec.kind.rfind("kaiming", 0) == 0;
  if (needsFans && shape.size() < 2) {
    error = spec.kind + " needs a tensor of rank >= 2 to compute its fans";
    return false;
  }
  auto fillUniform = [&](double low, double high) {
    for (float &x : out)
      x = float(low + (high - low) * rng.uniform());
  };
  auto fillNormal = [&](double mean, double stddev) {
    for (float &x : out)
      x = float(mean + stddev * rng.normal());
  };
  const std::string &k = spec.kind;
  if (k == "zeros") {
  } else if (k == "ones") {
    for (float &x : out)
      x = 1.0f;
  } else if (k == "constant") {
    for (float &x : out)
      x = float(num("value", 0));
  } else if (k == "normal") {
    fillNormal(num("mean", 0), num("std", 1));
  } else if (k == "uniform") {
    fillUniform(num("low", 0), num("high", 1));
  } else if (k == "xavier_uniform") {
    double a = num("gain", 1) * std::sqrt(6.0 / (fanIn + fanOut));
    fillUniform(-a, a);
  } else if (k == "xavier_normal") {
    fillNormal(0, num("gain", 1) * std::sqrt(2.0 / (fanIn + fanOut)));
  } else if (k == "kaiming_uniform" || k == "kaiming_normal") {
    double fan = sym("mode", "fan_in") == "fan_out" ? fanOut : fanIn;
    double stddev =
        gain(sym("nonlinearity", "leaky_relu"), num("a", 0)) / std::sqrt(fan);
    if (k == "kaiming_uniform")
      fillUniform(-std::sqrt(3.0) * stddev, std::sqrt(3.0) * stddev);
    else
      fillNormal(0, stddev);
  } else {
    error = "unknown initializer '" + k + "'";
    return false;
  }
  return true;
}
