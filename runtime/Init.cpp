//===- Init.cpp - Parameter initializers ----------------------------------===//

#include "runtime/Init.h"
#include "runtime/Failure.h"

#include <nlohmann/json.hpp>

#include <algorithm>
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

/// The standard normal's distribution function, Phi(x).
static double normalCdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

/// Phi's inverse for p in (0, 1): Acklam's rational approximation (relative
/// error 1.2e-9) and one Halley step on Phi, which makes it exact to double
/// precision.
static double normalQuantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                             -2.759285104469687e+02, 1.383577518672690e+02,
                             -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                             -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                             -2.400758277161838e+00, -2.549732539343734e+00,
                             4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                             2.445134137142996e+00, 3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - 0.02425) {
    double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) *
        q / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  double e = normalCdf(x) - p;
  double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

/// One draw of a standard normal limited to [lo, hi], by inverting Phi over
/// [Phi(lo), Phi(hi)] (as torch.nn.init.trunc_normal_ does with erfinv). An
/// interval above the mean is drawn as its mirror image below it, where Phi
/// is small and keeps its precision.
static double truncatedNormal(Rng &rng, double lo, double hi) {
  bool mirrored = lo > 0;
  if (mirrored) {
    double t = lo;
    lo = -hi;
    hi = -t;
  }
  double pLo = normalCdf(lo), pHi = normalCdf(hi);
  double z;
  if (!(pHi > pLo)) {
    // So far into the tail (below -37 standard deviations) that Phi cannot
    // tell the bounds apart: the density is then nearly flat on the
    // interval's scale.
    z = lo + (hi - lo) * rng.uniform();
  } else {
    // pLo may be 0 (lo = -100 for PyTorch's default bounds at std 0.02):
    // p is then 0 with a probability below 1e-300, mapped to lo.
    double p = pLo + (pHi - pLo) * rng.uniform();
    z = p > 0 && p < 1 ? normalQuantile(p) : p <= 0 ? lo : hi;
  }
  z = std::min(std::max(z, lo), hi);
  return mirrored ? -z : z;
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
  if (needsFans && shape.size() < 2)
    return failWith(
        error, spec.kind + " needs a tensor of rank >= 2 to compute its fans");
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
  } else if (k == "trunc_normal") {
    double mean = num("mean", 0), stddev = num("std", 1);
    double lo = (num("a", -2) - mean) / stddev;
    double hi = (num("b", 2) - mean) / stddev;
    // Rounding to f32 must not leave [a, b] either (PyTorch clamps too).
    float a = float(num("a", -2)), b = float(num("b", 2));
    for (float &x : out)
      x = std::clamp(float(mean + stddev * truncatedNormal(rng, lo, hi)), a, b);
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

InitSpec mnemo::runtime::initSpecOf(const std::string &json) {
  InitSpec spec;
  spec.kind = "zeros";
  nlohmann::json parsed = nlohmann::json::parse(json, nullptr, false);
  if (parsed.is_object())
    for (auto &[key, value] : parsed.items()) {
      if (key == "kind" && value.is_string())
        spec.kind = value.get<std::string>();
      else if (value.is_string())
        spec.symbols[key] = value.get<std::string>();
      else if (value.is_number())
        spec.numbers[key] = value.get<double>();
    }
  return spec;
}
