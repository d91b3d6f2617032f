//===- RuntimeTest.cpp - Safetensors, IDX files and initializers ----------===//

#include "lang/ops/optimizers/OptimizersKernels.h"
#include "runtime/Idx.h"
#include "runtime/Init.h"
#include "runtime/Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <zlib.h>

using namespace mnemo::runtime;

namespace {
std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "mnemo-runtime-" + name;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
} // namespace

TEST(Safetensors, RoundTrip) {
  SafetensorsFile file;
  file.metadata["format"] = "pt";
  file.tensors.push_back(
      StoredTensor::f32("blocks.0.attn.wq.weight", {2, 3}, {1, 2, 3, 4, 5, 6}));
  file.tensors.push_back(StoredTensor::i32("tokens", {4}, {7, 8, 9, 10}));
  std::string path = tempPath("roundtrip.safetensors"), error;
  ASSERT_TRUE(writeSafetensors(path, file, error)) << error;
  // The header is 8-byte aligned, as the reference implementation writes it.
  std::string bytes = readBytes(path);
  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  EXPECT_EQ(headerSize % 8, 0u);

  SafetensorsFile back;
  ASSERT_TRUE(readSafetensors(path, back, error)) << error;
  ASSERT_EQ(back.tensors.size(), 2u);
  const StoredTensor *w = back.find("blocks.0.attn.wq.weight");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  // The values come back bit for bit, in their type.
  EXPECT_EQ(w->dtype, "F32");
  EXPECT_EQ(w->bytes, StoredTensor::f32("", {6}, {1, 2, 3, 4, 5, 6}).bytes);
  EXPECT_EQ(back.find("tokens")->dtype, "I32");
  EXPECT_EQ(back.find("tokens")->bytes,
            StoredTensor::i32("", {4}, {7, 8, 9, 10}).bytes);
  EXPECT_EQ(back.metadata["format"], "pt");
}

TEST(Safetensors, CorruptFilesAreErrorsNotCrashes) {
  SafetensorsFile file;
  file.tensors.push_back(StoredTensor::f32("w", {4}, {1, 2, 3, 4}));
  std::string good = tempPath("good.safetensors"), error;
  ASSERT_TRUE(writeSafetensors(good, file, error));
  std::string bytes = readBytes(good);
  std::string path = tempPath("bad.safetensors");
  SafetensorsFile out;

  writeBytes(path, bytes.substr(0, 5));
  EXPECT_FALSE(readSafetensors(path, out, error));
  EXPECT_NE(error.find("shorter than its 8-byte header size"),
            std::string::npos)
      << error;

  writeBytes(path, bytes.substr(0, bytes.size() - 4));
  EXPECT_FALSE(readSafetensors(path, out, error));
  EXPECT_NE(error.find("outside the file"), std::string::npos) << error;

  std::string notJson = bytes;
  notJson[8] = '[';
  writeBytes(path, notJson);
  EXPECT_FALSE(readSafetensors(path, out, error));
  EXPECT_NE(error.find("not a JSON object"), std::string::npos) << error;

  std::string huge = bytes;
  huge[7] = char(0x7f);
  writeBytes(path, huge);
  EXPECT_FALSE(readSafetensors(path, out, error));
  EXPECT_NE(error.find("exceeds the file"), std::string::npos) << error;

  EXPECT_FALSE(readSafetensors(tempPath("does-not-exist"), out, error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

TEST(Safetensors, AFailedWriteLeavesTheOldFile) {
  std::string path = tempPath("keep.safetensors"), error;
  SafetensorsFile file;
  file.tensors.push_back(StoredTensor::f32("w", {1}, {42}));
  ASSERT_TRUE(writeSafetensors(path, file, error));
  std::string before = readBytes(path);
  // A tensor whose bytes do not match its shape is refused before writing.
  SafetensorsFile bad;
  bad.tensors.push_back(StoredTensor{"w", "F32", {3}, std::vector<uint8_t>(4)});
  EXPECT_FALSE(writeSafetensors(path, bad, error));
  EXPECT_EQ(readBytes(path), before);
  EXPECT_FALSE(writeSafetensors("/nonexistent-dir/x.safetensors", file, error));
  // The message names the file asked for, not the temporary written first.
  EXPECT_NE(error.find("cannot write '/nonexistent-dir/x.safetensors'"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find(".tmp."), std::string::npos) << error;
}

TEST(Idx, ReadsRawAndGzipped) {
  // An IDX3 file: magic 0x00000803, dims 2 x 2 x 3, then 12 bytes.
  std::string idx = std::string("\0\0\x08\x03", 4) +
                    std::string("\0\0\0\x02\0\0\0\x02\0\0\0\x03", 12);
  for (int i = 0; i < 12; ++i)
    idx += char(i);
  std::string raw = tempPath("images-idx3-ubyte");
  writeBytes(raw, idx);
  std::string gz = raw + ".gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, idx.data(), unsigned(idx.size()));
  gzclose(f);
  for (const std::string &path : {raw, gz}) {
    IdxArray array;
    std::string error;
    ASSERT_TRUE(readIdx(path, array, error)) << error;
    EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 2, 3}));
    EXPECT_EQ(array.data[11], 11);
  }
  IdxArray first;
  std::string error;
  ASSERT_TRUE(readIdx(gz, first, error, /*maxItems=*/1));
  EXPECT_EQ(first.shape, (std::vector<int64_t>{1, 2, 3}));
  writeBytes(raw, idx.substr(0, 20));
  EXPECT_FALSE(readIdx(raw, first, error));
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
}

TEST(Init, FollowsPyTorchFormulas) {
  Rng rng(1);
  std::vector<float> out;
  std::string error;
  InitSpec kaiming{"kaiming_uniform", {{"a", std::sqrt(5.0)}}, {}};
  ASSERT_TRUE(initialize(kaiming, {64, 100}, rng, out, error));
  // gain sqrt(2 / (1 + a^2)) = sqrt(1/3); bound = gain * sqrt(3 / fan_in) =
  // 0.1.
  float maxAbs = 0;
  for (float x : out)
    maxAbs = std::max(maxAbs, std::fabs(x));
  EXPECT_LE(maxAbs, 0.1f);
  EXPECT_GT(maxAbs, 0.099f);

  InitSpec normal{"normal", {{"std", 0.02}, {"mean", 0}}, {}};
  ASSERT_TRUE(initialize(normal, {100000}, rng, out, error));
  double sum = 0, sq = 0;
  for (float x : out) {
    sum += x;
    sq += double(x) * x;
  }
  EXPECT_NEAR(sum / out.size(), 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(sq / out.size()), 0.02, 5e-4);

  InitSpec xavier{"xavier_uniform", {{"gain", 1}}, {}};
  EXPECT_FALSE(initialize(xavier, {10}, rng, out, error));
  EXPECT_NE(error.find("rank >= 2"), std::string::npos) << error;
  EXPECT_FALSE(
      initialize(InitSpec{"orthogonal", {}, {}}, {2, 2}, rng, out, error));
}

// trunc_normal's draws have the truncated normal's moments (closed forms
// below), stay within [a, b], and work far in a tail, where drawing normals
// and rejecting those outside would take forever.
TEST(Init, TruncNormalHasTheTruncatedDistribution) {
  auto phi = [](double x) {
    return std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
  };
  auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  struct Case {
    double mean, std, a, b;
  } cases[] = {{0, 1, -2, 2},        // PyTorch's defaults
               {0, 0.02, -2, 2},     // ViT's: bounds 100 std out, a normal
               {0, 0.02, 0.05, 0.1}, // 2.5 to 5 standard deviations out
               {1, 0.5, -1, 1.25}};  // asymmetric around the mean
  Rng rng(3);
  for (const Case &c : cases) {
    std::vector<float> out;
    std::string error;
    InitSpec spec{"trunc_normal",
                  {{"mean", c.mean}, {"std", c.std}, {"a", c.a}, {"b", c.b}},
                  {}};
    ASSERT_TRUE(initialize(spec, {200000}, rng, out, error)) << error;
    double alpha = (c.a - c.mean) / c.std, beta = (c.b - c.mean) / c.std;
    double z = cdf(beta) - cdf(alpha);
    double ratio = (phi(alpha) - phi(beta)) / z;
    double mean = c.mean + c.std * ratio;
    double variance =
        c.std * c.std *
        (1 + (alpha * phi(alpha) - beta * phi(beta)) / z - ratio * ratio);
    double sum = 0, sq = 0;
    for (float x : out) {
      ASSERT_GE(x, float(c.a));
      ASSERT_LE(x, float(c.b));
      sum += x;
    }
    double sampleMean = sum / out.size();
    for (float x : out)
      sq += (x - sampleMean) * (x - sampleMean);
    double sampleVariance = sq / (out.size() - 1);
    // Standard errors for 200000 draws: sqrt(variance / n) for the mean and
    // about variance * sqrt(2 / n) for the variance; allow 6 of each.
    double n = double(out.size());
    EXPECT_NEAR(sampleMean, mean, 6 * std::sqrt(variance / n));
    EXPECT_NEAR(sampleVariance, variance, 6 * variance * std::sqrt(2 / n));
  }
}

TEST(Init, SeedsAreReproducibleAndPerName) {
  std::vector<float> a, b, c;
  std::string error;
  InitSpec spec{"normal", {{"std", 1}, {"mean", 0}}, {}};
  Rng r1 = rngFor(7, "fc1.weight"), r2 = rngFor(7, "fc1.weight"),
      r3 = rngFor(7, "fc2.weight");
  initialize(spec, {8}, r1, a, error);
  initialize(spec, {8}, r2, b, error);
  initialize(spec, {8}, r3, c, error);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

// adamw8bit's codes (lang/ops/optimizers/OptimizersKernels.h): byte 0 is zero,
// every code encodes back to itself, values keep their sign and order, and
// block-wise quantization errs by at most half the gap between neighboring
// codes.
TEST(Quantize8, CodesRoundTripAndQuantizeToTheNearest) {
  using namespace mnemo::quant8;
  for (bool isSigned : {true, false}) {
    EXPECT_EQ(decode(0, isSigned), 0.0f);
    for (int c = 0; c < 256; ++c) {
      if (isSigned && c == 0x80)
        continue; // -0, the same value as 0
      float value = decode(uint8_t(c), isSigned);
      EXPECT_EQ(encode(value, isSigned), c) << "code " << c;
      EXPECT_LE(std::fabs(value), 1.0f);
      if (!isSigned)
        EXPECT_GE(value, 0.0f);
    }
    const CodeTable &t = table(isSigned);
    EXPECT_EQ(t.size, isSigned ? 255 : 256);
    for (int i = 1; i < t.size; ++i)
      EXPECT_LT(t.value[i - 1], t.value[i]);
    // The largest code is near 1 and the smallest positive near 1e-7
    // (unsigned) or 1e-6 (signed): the dynamic range the paper gives.
    EXPECT_GT(t.value[t.size - 1], 0.99f);
    float smallest = 1;
    for (int i = 0; i < t.size; ++i)
      if (t.value[i] > 0)
        smallest = std::min(smallest, t.value[i]);
    EXPECT_LT(smallest, isSigned ? 2e-6f : 2e-7f);
  }
  // A block of 2048 values spanning six decades, and a partial block.
  std::vector<float> values(2048 + 100);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = float((i % 2 ? -1.0 : 1.0) *
                      std::pow(10.0, -6.0 * double(i % 97) / 96.0));
  std::vector<uint8_t> codes(values.size());
  std::vector<float> absmax(2);
  quantize(int64_t(values.size()), 2048, values.data(), codes.data(),
           absmax.data(), true);
  EXPECT_EQ(absmax[0], 1.0f);
  const CodeTable &t = table(true);
  for (size_t i = 0; i < values.size(); ++i) {
    float scale = absmax[i / 2048], x = values[i] / scale;
    float got = decode(codes[i], true);
    // No code lies strictly closer to x than the one chosen.
    for (int k = 0; k < t.size; ++k)
      EXPECT_GE(std::fabs(t.value[k] - x), std::fabs(got - x) - 1e-9f)
          << "value " << i;
    EXPECT_EQ(got > 0, x > 0) << "value " << i;
  }
}
