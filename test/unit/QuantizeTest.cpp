//===- QuantizeTest.cpp - The trainer's quantization against the reference ===//
//
// The trainer's fake quantization and inference formats
// (lang/ops/quantization/QuantizationFormulas.h) and adamw8bit's
// nearest-code search (lang/ops/optimizers/OptimizersKernels.h, bucketed)
// against the interpreter's own rules
// (lang/ops/quantization/QuantizationReference.h): bit for bit, on values
// placed on and around rounding boundaries, since rounding is where two
// implementations part.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/optimizers/OptimizersKernels.h"
#include "lang/ops/quantization/QuantizationFormulas.h"
#include "lang/ops/quantization/QuantizationReference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace reference = mnemo::reference;
namespace fakequant = mnemo::fakequant;
namespace quant8 = mnemo::quant8;

namespace {

/// Values of both signs around a range [lo, hi]: uniform, exactly on the
/// half-code boundaries of `scale`, one ulp either side, and beyond.
std::vector<float> probesOf(std::mt19937 &rng, float lo, float hi,
                            float scale) {
  std::uniform_real_distribution<float> uniform(lo * 1.5f, hi * 1.5f);
  std::vector<float> x;
  for (int i = 0; i < 200; ++i)
    x.push_back(uniform(rng));
  for (int k = -300; k <= 300; ++k) {
    float boundary = (float(k) + 0.5f) * scale;
    x.push_back(boundary);
    x.push_back(std::nextafter(boundary, 1e30f));
    x.push_back(std::nextafter(boundary, -1e30f));
  }
  return x;
}

TEST(Quantize, FakeQuantMatchesTheReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> bound(0.01f, 4.0f);
  for (int trial = 0; trial < 60; ++trial) {
    bool symmetric = trial % 2;
    auto [qmin, qmax] = trial % 3 == 0   ? std::pair{-128, 127}
                        : trial % 3 == 1 ? std::pair{-8, 7}
                                         : std::pair{0, 255};
    float lo = -bound(rng), hi = trial % 5 == 0 ? -lo * 0.25f : bound(rng);
    reference::QuantParams expected =
        reference::quantParams(lo, hi, qmin, qmax, symmetric);
    fakequant::QParams got = fakequant::qparams(lo, hi, qmin, qmax, symmetric);
    ASSERT_EQ(got.scale, expected.scale);
    ASSERT_EQ(got.zeroPoint, expected.zeroPoint);
    std::vector<float> x = probesOf(rng, lo, hi, expected.scale);
    std::vector<float> out(x.size()), passed(x.size());
    int64_t n = int64_t(x.size());
    for (int64_t e = 0; e < n; ++e) {
      out[e] = fakequant::fakeQuant(x[e], got, qmin, qmax);
      passed[e] =
          fakequant::passesGradient(x[e], got, qmin, qmax) ? 1.0f : 0.0f;
    }
    for (int64_t e = 0; e < n; ++e) {
      ASSERT_EQ(out[e], reference::fakeQuantize(x[e], expected, qmin, qmax))
          << "x = " << x[e];
      ASSERT_EQ(passed[e] != 0.0f,
                reference::fakeQuantPasses(x[e], expected, qmin, qmax))
          << "x = " << x[e];
    }
  }
}

TEST(Quantize, ObserversMatchTheReference) {
  for (float averaging : {0.0f, 0.01f, 0.5f})
    for (bool first : {true, false})
      for (bool lower : {true, false})
        for (float seen : {-2.0f, 0.0f, 0.75f})
          EXPECT_EQ(
              fakequant::observe(0.5f, seen, first, averaging, lower),
              reference::observedBound(0.5f, seen, first, averaging, lower));
}

TEST(Quantize, InferenceFormatsMatchTheReference) {
  for (float absMax : {0.0f, 1e-30f, 0.3f, 127.0f, 5e5f}) {
    float scale = fakequant::rowScale(absMax);
    ASSERT_EQ(scale, reference::rowScale(absMax));
    for (int k = -130; k <= 130; ++k) {
      float x = (float(k) + 0.5f) * scale;
      for (float probe :
           {x, std::nextafter(x, 1e30f), std::nextafter(x, -1e30f)})
        ASSERT_EQ(fakequant::rowCode(probe, 1.0f / scale),
                  reference::rowCode(probe, scale))
            << probe << " at scale " << scale;
    }
  }
  // NaN has code 0 (converting it to int is undefined); infinities clamp.
  for (float probe : {std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
    int expected = std::isnan(probe) ? 0 : probe > 0 ? 127 : -127;
    EXPECT_EQ(fakequant::rowCode(probe, 0.5f), expected) << probe;
    EXPECT_EQ(reference::rowCode(probe, 2.0f), expected) << probe;
  }
  // A row with a NaN or an infinity has an infinite scale: its codes are 0.
  EXPECT_EQ(fakequant::rowCode(1.5f, 0.0f), 0);
  EXPECT_EQ(fakequant::rowCode(std::numeric_limits<float>::infinity(), 0.0f),
            0);
  EXPECT_EQ(reference::rowCode(std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::infinity()),
            0);
  // Every byte of the packed int4 and 2:4 formats.
  for (int byte = 0; byte < 256; ++byte) {
    signed char packed[2] = {static_cast<signed char>(byte),
                             static_cast<signed char>(255 - byte)};
    for (int e = 0; e < 4; ++e)
      ASSERT_EQ(fakequant::int4Code(packed, e), reference::int4Code(packed, e));
    for (int g = 0; g < 4; ++g)
      for (int kept = 0; kept < 2; ++kept)
        ASSERT_EQ(fakequant::sparse24Position(packed, g, kept),
                  reference::sparse24Position(packed, g, kept));
  }
}

TEST(Quantize, EightBitCodesMatchTheReference) {
  // Every code's value, the midpoints between neighbouring codes (where
  // the tie goes to the smaller magnitude), one ulp either side, and
  // values outside [-1, 1] and NaN.
  for (bool isSigned : {true, false}) {
    std::vector<float> values;
    for (int c = 0; c < 256; ++c)
      values.push_back(reference::codeValue(uint8_t(c), isSigned));
    std::sort(values.begin(), values.end());
    std::vector<float> probes = values;
    for (size_t i = 1; i < values.size(); ++i) {
      float mid = values[i - 1] + (values[i] - values[i - 1]) / 2.0f;
      probes.insert(probes.end(), {mid, std::nextafter(mid, 2.0f),
                                   std::nextafter(mid, -2.0f)});
    }
    probes.insert(probes.end(), {1.5f, 3.0f, -7.0f, 1e-12f,
                                 std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN()});
    for (float x : probes) {
      if (!isSigned && x < 0)
        continue;
      ASSERT_EQ(int(quant8::encode(x, isSigned)),
                int(reference::nearestCode(x, isSigned)))
          << "x = " << x << (isSigned ? " (signed)" : " (unsigned)");
    }
    for (int c = 0; c < 256; ++c)
      ASSERT_EQ(quant8::decode(uint8_t(c), isSigned),
                reference::codeValue(uint8_t(c), isSigned));
  }
}

} // namespace
