//===- InferenceOpsTest.cpp - Inference's compressed-weight ops -----------===//
//
// The ops mnemoc --mode=inference reads compressed weights with, checked
// against what they replace, through the reference interpreter, and the CPU
// kernels against the interpreter:
//
// - quantize_rows + matmul_int8 equal x @ fake_quant(W)^T within the
//   rounding of the int8 activations: |error| <= scale_x / 2 * sum |W^|
//   for every output (W^ the fake-quantized weight), symmetric and affine;
// - dequantize of packed int4 equals the fake-quantized weight;
// - matmul_sparse24 and matmul_csr equal the masked dense product.
//
// The weights are packed here in the layouts the ops document (the export
// writes the same; test/reference/check_export.py reads them back).
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoDialect.h"
#include "lang/interpreter/Interpreter.h"
#include "lang/ops/quantization/QuantizationKernels.h"
#include "runtime/cpu/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace mnemo;

namespace {

struct Fixture {
  MLIRContext context;
  OwningOpRef<ModuleOp> module;

  explicit Fixture(const std::string &text) {
    context.getOrLoadDialect<MnemoDialect>();
    context.getOrLoadDialect<func::FuncDialect>();
    module = parseSourceString<ModuleOp>(text, &context);
  }
  std::vector<Tensor> run(const char *name, std::vector<Tensor> args) {
    auto f = module->lookupSymbol<func::FuncOp>(name);
    std::string error;
    auto out = Interpreter().run(f, args, error);
    EXPECT_TRUE(succeeded(out)) << error;
    return succeeded(out) ? *out : std::vector<Tensor>{};
  }
};

Tensor random(std::vector<int64_t> shape, double scale, std::mt19937 &rng) {
  Tensor t(ElementType::F32, std::move(shape));
  std::normal_distribution<float> normal(0.0f, float(scale));
  for (double &v : t.data)
    v = normal(rng);
  return t;
}

std::vector<float> floats(const Tensor &t) {
  return std::vector<float>(t.data.begin(), t.data.end());
}

constexpr int64_t kRows = 16, kChannels = 24, kDepth = 200;

const char *const kInt8Module = R"mlir(
func.func @fake(%x: tensor<16x200xf32>, %w: tensor<24x200xf32>,
                %lo: tensor<24xf32>, %hi: tensor<24xf32>)
    -> (tensor<16x24xf32>, tensor<24x200xf32>) {
  %wq = mnemo.fake_quant %w, %lo, %hi {axis = 0 : i64, quant_max = 127 : i64,
      quant_min = -128 : i64, symmetric = SYMMETRIC}
      : (tensor<24x200xf32>, tensor<24xf32>, tensor<24xf32>) -> tensor<24x200xf32>
  %y = mnemo.matmul %x, %wq {transpose_rhs = true}
      : (tensor<16x200xf32>, tensor<24x200xf32>) -> tensor<16x24xf32>
  return %y, %wq : tensor<16x24xf32>, tensor<24x200xf32>
}
func.func @int8(%x: tensor<16x200xf32>, %w: tensor<24x200xi8>,
                %s: tensor<24xf32>, %z: tensor<24xi32>)
    -> (tensor<16x24xf32>, tensor<16xf32>) {
  %xq, %xs, %xsum = mnemo.quantize_rows %x
      : (tensor<16x200xf32>) -> (tensor<16x200xi8>, tensor<16xf32>, tensor<16xi32>)
  %y = mnemo.matmul_int8 %xq, %xs, %xsum, %w, %s, %z
      : (tensor<16x200xi8>, tensor<16xf32>, tensor<16xi32>, tensor<24x200xi8>, tensor<24xf32>, tensor<24xi32>) -> tensor<16x24xf32>
  return %y, %xs : tensor<16x24xf32>, tensor<16xf32>
}
)mlir";

void checkInt8(bool symmetric) {
  std::string text = kInt8Module;
  text.replace(text.find("SYMMETRIC"), 9, symmetric ? "true" : "false");
  Fixture fixture(text);
  ASSERT_TRUE(fixture.module);
  std::mt19937 rng(symmetric ? 1 : 2);
  Tensor x = random({kRows, kDepth}, 1.0, rng);
  Tensor w = random({kChannels, kDepth}, 0.05, rng);
  // Affine weights get an off-centre range, so that zero points matter.
  if (!symmetric)
    for (double &v : w.data)
      v += 0.03;
  // The observed range per output channel, and the codes the export
  // writes for it (runtime/Export.cpp).
  Tensor lo(ElementType::F32, {kChannels}), hi(ElementType::F32, {kChannels});
  Tensor codes(ElementType::I8, {kChannels, kDepth}),
      scale(ElementType::F32, {kChannels}), zero(ElementType::I32, {kChannels});
  for (int64_t c = 0; c < kChannels; ++c) {
    float l = float(w.data[c * kDepth]), h = l;
    for (int64_t k = 0; k < kDepth; ++k) {
      l = std::min(l, float(w.data[c * kDepth + k]));
      h = std::max(h, float(w.data[c * kDepth + k]));
    }
    lo.data[c] = l;
    hi.data[c] = h;
    fakequant::QParams q = fakequant::qparams(l, h, -128, 127, symmetric);
    scale.data[c] = q.scale;
    zero.data[c] = q.zeroPoint;
    for (int64_t k = 0; k < kDepth; ++k) {
      float v = fakequant::quantized(float(w.data[c * kDepth + k]), q);
      codes.data[c * kDepth + k] = std::min(127.0f, std::max(-128.0f, v));
    }
  }
  std::vector<Tensor> fake = fixture.run("fake", {x, w, lo, hi});
  std::vector<Tensor> int8 = fixture.run("int8", {x, codes, scale, zero});
  ASSERT_EQ(fake.size(), 2u);
  ASSERT_EQ(int8.size(), 2u);
  const Tensor &yFake = fake[0], &wHat = fake[1], &yInt8 = int8[0];
  double worst = 0, largest = 0;
  for (int64_t m = 0; m < kRows; ++m)
    for (int64_t n = 0; n < kChannels; ++n) {
      double absW = 0, absProducts = 0;
      for (int64_t k = 0; k < kDepth; ++k) {
        absW += std::fabs(wHat.data[n * kDepth + k]);
        absProducts +=
            std::fabs(x.data[m * kDepth + k] * wHat.data[n * kDepth + k]);
      }
      double bound = 0.5 * int8[1].data[m] * absW + 1e-5 * absProducts;
      double error = std::fabs(yInt8.data[m * kChannels + n] -
                               yFake.data[m * kChannels + n]);
      EXPECT_LE(error, bound) << "output " << m << "," << n;
      worst = std::max(worst, error / bound);
      largest = std::max(largest, std::fabs(yFake.data[m * kChannels + n]));
    }
  // The bound is tight enough to mean something: the errors use it.
  EXPECT_GT(worst, 0.01);

  // The CPU kernels compute the same integers and the same rescale.
  std::vector<float> xf = floats(x), sf = floats(scale);
  std::vector<int8_t> xq(kRows * kDepth), wq(kChannels * kDepth);
  std::vector<int32_t> xsum(kRows), zf(kChannels);
  std::vector<float> xs(kRows), y(kRows * kChannels);
  for (int64_t e = 0; e < kChannels * kDepth; ++e)
    wq[e] = int8_t(codes.data[e]);
  for (int64_t c = 0; c < kChannels; ++c)
    zf[c] = int32_t(zero.data[c]);
  cpu::quantizeRows(kRows, kDepth, xf.data(), xq.data(), xs.data(),
                    xsum.data());
  cpu::matmulInt8(kRows, kChannels, kDepth, xq.data(), xs.data(), xsum.data(),
                  wq.data(), sf.data(), zf.data(), y.data());
  for (int64_t e = 0; e < kRows * kChannels; ++e)
    EXPECT_EQ(y[e], float(yInt8.data[e])) << e;
}

TEST(InferenceOps, Int8EqualsFakeQuantWithinRoundingSymmetric) {
  checkInt8(true);
}
TEST(InferenceOps, Int8EqualsFakeQuantWithinRoundingAffine) {
  checkInt8(false);
}

// A row with a NaN or an infinity gives NaN in each of its outputs, as
// x @ W^T does in f32 (its scale is infinite, its codes 0); before, NaN
// codes were converted to int, which is undefined. The other rows are
// untouched. The interpreter and the CPU kernels agree.
TEST(InferenceOps, Int8RowsWithNanOrInfinityGiveNan) {
  std::string text = kInt8Module;
  text.replace(text.find("SYMMETRIC"), 9, "true");
  Fixture fixture(text);
  ASSERT_TRUE(fixture.module);
  std::mt19937 rng(3);
  Tensor x = random({kRows, kDepth}, 1.0, rng);
  x.data[3 * kDepth + 7] = std::nan("");
  x.data[5 * kDepth] = -INFINITY;
  Tensor codes(ElementType::I8, {kChannels, kDepth}),
      scale(ElementType::F32, {kChannels}), zero(ElementType::I32, {kChannels});
  for (int64_t e = 0; e < kChannels * kDepth; ++e)
    codes.data[e] = int(e % 255) - 127;
  for (int64_t c = 0; c < kChannels; ++c)
    scale.data[c] = 0.01 * double(c + 1);
  std::vector<Tensor> int8 = fixture.run("int8", {x, codes, scale, zero});
  ASSERT_EQ(int8.size(), 2u);

  std::vector<float> xf = floats(x), sf = floats(scale), xs(kRows),
                     y(kRows * kChannels);
  std::vector<int8_t> xq(kRows * kDepth),
      wq(codes.data.begin(), codes.data.end());
  std::vector<int32_t> xsum(kRows), zf(kChannels, 0);
  cpu::quantizeRows(kRows, kDepth, xf.data(), xq.data(), xs.data(),
                    xsum.data());
  cpu::matmulInt8(kRows, kChannels, kDepth, xq.data(), xs.data(), xsum.data(),
                  wq.data(), sf.data(), zf.data(), y.data());
  for (int64_t m = 0; m < kRows; ++m) {
    bool poisoned = m == 3 || m == 5;
    EXPECT_EQ(std::isinf(xs[m]), poisoned) << "row " << m;
    EXPECT_EQ(std::isinf(int8[1].data[m]), poisoned) << "row " << m;
    for (int64_t n = 0; n < kChannels; ++n) {
      int64_t e = m * kChannels + n;
      EXPECT_EQ(std::isnan(y[e]), poisoned) << m << "," << n;
      EXPECT_EQ(std::isnan(int8[0].data[e]), poisoned) << m << "," << n;
      if (!poisoned)
        EXPECT_EQ(y[e], float(int8[0].data[e])) << m << "," << n;
    }
  }
}

TEST(InferenceOps, DequantizeUnpacksInt4Groups) {
  Fixture fixture(R"mlir(
func.func @f(%c: tensor<6xi8>, %s: tensor<3xf32>, %z: tensor<3xi32>)
    -> tensor<3x4xf32> {
  %w = mnemo.dequantize %c, %s, %z {bits = 4 : i64}
      : (tensor<6xi8>, tensor<3xf32>, tensor<3xi32>) -> tensor<3x4xf32>
  return %w : tensor<3x4xf32>
}
)mlir");
  ASSERT_TRUE(fixture.module);
  // Codes -8..3, two per byte, the even element in the low nibble.
  std::vector<int> values = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3};
  Tensor codes(ElementType::I8, {6});
  for (int b = 0; b < 6; ++b)
    codes.data[b] = int8_t(
        uint8_t((values[2 * b] & 0xf) | ((values[2 * b + 1] & 0xf) << 4)));
  Tensor scale(ElementType::F32, {3}), zero(ElementType::I32, {3});
  scale.data = {0.5, 0.25, 2.0};
  zero.data = {0, -1, 2};
  std::vector<Tensor> out = fixture.run("f", {codes, scale, zero});
  ASSERT_EQ(out.size(), 1u);
  std::vector<int8_t> bytes(codes.data.begin(), codes.data.end());
  std::vector<float> cpu(12), s = floats(scale);
  std::vector<int32_t> z = {0, -1, 2};
  cpu::dequantize(12, 3, 4, bytes.data(), s.data(), z.data(), cpu.data());
  for (int e = 0; e < 12; ++e) {
    double expected = (values[e] - zero.data[e / 4]) * scale.data[e / 4];
    EXPECT_EQ(out[0].data[e], expected) << e;
    EXPECT_EQ(cpu[e], float(expected)) << e;
  }
}

const char *const kSparseModule = R"mlir(
func.func @dense(%x: tensor<16x200xf32>, %w: tensor<24x200xf32>) -> tensor<16x24xf32> {
  %y = mnemo.matmul %x, %w {transpose_rhs = true}
      : (tensor<16x200xf32>, tensor<24x200xf32>) -> tensor<16x24xf32>
  return %y : tensor<16x24xf32>
}
func.func @sparse24(%x: tensor<16x200xf32>, %v: tensor<24x100xf32>,
                    %i: tensor<24x25xi8>) -> tensor<16x24xf32> {
  %y = mnemo.matmul_sparse24 %x, %v, %i
      : (tensor<16x200xf32>, tensor<24x100xf32>, tensor<24x25xi8>) -> tensor<16x24xf32>
  return %y : tensor<16x24xf32>
}
func.func @csr(%x: tensor<16x200xf32>, %v: tensor<3000xf32>, %c: tensor<3000xi16>,
               %o: tensor<25xi32>) -> tensor<16x24xf32> {
  %y = mnemo.matmul_csr %x, %v, %c, %o
      : (tensor<16x200xf32>, tensor<3000xf32>, tensor<3000xi16>, tensor<25xi32>) -> tensor<16x24xf32>
  return %y : tensor<16x24xf32>
}
)mlir";

void expectClose(const std::vector<double> &got, const Tensor &want,
                 const char *what) {
  ASSERT_EQ(int64_t(got.size()), want.numElements());
  for (size_t e = 0; e < got.size(); ++e)
    EXPECT_NEAR(got[e], want.data[e], 1e-5 * (1 + std::fabs(want.data[e])))
        << what << " " << e;
}

TEST(InferenceOps, Sparse24AndCsrEqualTheMaskedDenseProduct) {
  Fixture fixture(kSparseModule);
  ASSERT_TRUE(fixture.module);
  std::mt19937 rng(3);
  Tensor x = random({kRows, kDepth}, 1.0, rng);
  Tensor w = random({kChannels, kDepth}, 0.1, rng);
  // Keep two of every four (positions varying with the group), then pack
  // the kept values and their positions.
  Tensor values(ElementType::F32, {kChannels, kDepth / 2}),
      indices(ElementType::I8, {kChannels, kDepth / 8});
  std::vector<uint8_t> packed(kChannels * kDepth / 8, 0);
  for (int64_t n = 0; n < kChannels; ++n)
    for (int64_t g = 0; g < kDepth / 4; ++g) {
      int first = int((n + g) % 3), second = first + 1 + int(g % (3 - first));
      unsigned positions = unsigned(first) | unsigned(second) << 2;
      packed[n * (kDepth / 8) + g / 2] |= uint8_t(positions << (4 * (g % 2)));
      values.data[n * (kDepth / 2) + 2 * g] =
          w.data[n * kDepth + 4 * g + first];
      values.data[n * (kDepth / 2) + 2 * g + 1] =
          w.data[n * kDepth + 4 * g + second];
      for (int j = 0; j < 4; ++j)
        if (j != first && j != second)
          w.data[n * kDepth + 4 * g + j] = 0.0;
    }
  for (size_t b = 0; b < packed.size(); ++b)
    indices.data[b] = int8_t(packed[b]);
  Tensor dense = fixture.run("dense", {x, w})[0];
  Tensor sparse = fixture.run("sparse24", {x, values, indices})[0];
  expectClose(std::vector<double>(sparse.data.begin(), sparse.data.end()),
              dense, "interpreter 2:4");
  std::vector<float> xf = floats(x), vf = floats(values), y(kRows * kChannels);
  std::vector<int8_t> idx(packed.begin(), packed.end());
  std::vector<float> scratch(kChannels * kDepth);
  cpu::matmulSparse24(kRows, kChannels, kDepth, xf.data(), vf.data(),
                      idx.data(), scratch.data(), y.data());
  expectClose(std::vector<double>(y.begin(), y.end()), dense, "CPU 2:4");

  // The same weight in CSR, in a plan with room for 3000 nonzeros (it has
  // 4800 / 2 = 2400): the rest is never read.
  Tensor csrValues(ElementType::F32, {3000}), columns(ElementType::I16, {3000}),
      offsets(ElementType::I32, {kChannels + 1});
  int64_t count = 0;
  for (int64_t n = 0; n < kChannels; ++n) {
    for (int64_t k = 0; k < kDepth; ++k)
      if (w.data[n * kDepth + k] != 0.0) {
        ASSERT_LT(count, 3000);
        csrValues.data[count] = w.data[n * kDepth + k];
        columns.data[count++] = double(k);
      }
    offsets.data[n + 1] = double(count);
  }
  for (int64_t e = count; e < 3000; ++e)
    columns.data[e] = 30000; // garbage past the end: must not be read
  Tensor csr = fixture.run("csr", {x, csrValues, columns, offsets})[0];
  expectClose(std::vector<double>(csr.data.begin(), csr.data.end()), dense,
              "interpreter CSR");
  std::vector<float> cv = floats(csrValues);
  std::vector<int16_t> c16(columns.data.begin(), columns.data.end());
  std::vector<int32_t> c32(columns.data.begin(), columns.data.end()),
      off(offsets.data.begin(), offsets.data.end());
  for (bool narrow : {true, false}) {
    std::fill(y.begin(), y.end(), 0.0f);
    cpu::matmulCsr(kRows, kChannels, kDepth, 3000, xf.data(), cv.data(),
                   narrow ? c16.data() : nullptr, narrow ? nullptr : c32.data(),
                   off.data(), scratch.data(), y.data());
    EXPECT_EQ(cpu::takeError(), "");
    expectClose(std::vector<double>(y.begin(), y.end()), dense, "CPU CSR");
  }

  // A bad file's offsets are an error, not a wild read.
  off[kChannels] = 3001;
  cpu::matmulCsr(kRows, kChannels, kDepth, 3000, xf.data(), cv.data(),
                 c16.data(), nullptr, off.data(), scratch.data(), y.data());
  EXPECT_NE(cpu::takeError().find("row offsets"), std::string::npos);
  offsets.data[kChannels] = 3001;
  auto f = fixture.module->lookupSymbol<func::FuncOp>("csr");
  std::string error;
  EXPECT_TRUE(
      failed(Interpreter().run(f, {x, csrValues, columns, offsets}, error)));
}

} // namespace
