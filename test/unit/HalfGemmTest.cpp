//===- HalfGemmTest.cpp - GEMMs on 16-bit storage, tile by tile ----------===//
//
// runtime/cpu/Kernels.h's gemmHalf works in tiles of C by the reduction,
// so that its f32 copies stay small: a product for each way of tiling, in
// every transposition, with a leading dimension wider than the matrix,
// against the sum in double, in exactly the workspace
// gemmHalfWorkspaceFloats gives it.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Half.h"
#include "runtime/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace mnemo;
using cpu::bf16_t;

namespace {

/// gemmHalf on an m x n x k product against the sum in double at 3000
/// sampled entries (and the corners), in every transposition.
void checkProduct(int64_t m, int64_t n, int64_t k) {
  const int64_t ldc = n + 3;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<bf16_t> a(m * k), b(k * n);
  for (bf16_t &x : a)
    x = bf16_t(normal(rng));
  for (bf16_t &x : b)
    x = bf16_t(normal(rng));
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      int64_t lda = transA ? m : k, ldb = transB ? k : n;
      auto A = [&](int64_t i, int64_t p) {
        return double(float(transA ? a[p * lda + i] : a[i * lda + p]));
      };
      auto B = [&](int64_t p, int64_t j) {
        return double(float(transB ? b[j * ldb + p] : b[p * ldb + j]));
      };
      int64_t floats = cpu::gemmHalfWorkspaceFloats(m, n, k);
      std::vector<float> workspace(floats + 64, 777.0f);
      std::vector<bf16_t> c(m * ldc, bf16_t(-5.0f));
      cpu::gemmHalf(transA, transB, m, n, k, a.data(), lda, b.data(), ldb,
                    c.data(), ldc, workspace.data());
      for (int64_t i = floats; i < floats + 64; ++i)
        ASSERT_EQ(workspace[i], 777.0f) << "wrote past the workspace";
      std::uniform_int_distribution<int64_t> row(0, m - 1), col(0, n - 1);
      for (int trial = 0; trial < 3000; ++trial) {
        int64_t i = trial < 2 ? trial * (m - 1) : row(rng),
                j = trial < 2 ? trial * (n - 1) : col(rng);
        double want = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          want += A(i, p) * B(p, j);
          magnitude += std::abs(A(i, p) * B(p, j));
        }
        // The f32 sums' rounding (well below 1e-4 of the terms' magnitude
        // over a few thousand terms) and C's rounding to bf16 (2^-9 of the
        // value).
        ASSERT_NEAR(float(c[i * ldc + j]), want,
                    1e-4 * magnitude + std::abs(want) / 256)
            << transA << transB << " C[" << i << "," << j << "]";
      }
      // The padding between C's rows is not written.
      EXPECT_EQ(float(c[n]), -5.0f);
    }
}

/// A product's shape and which of its dimensions halfGemmTiles splits.
struct Tiling {
  const char *what;
  int64_t m, n, k;
  bool rowsSplit, colsSplit, depthSplit;
};

TEST(HalfGemm, EveryTiling) {
  for (const Tiling &t : {
           // op(B) fits a tile: widened once, A by blocks of rows.
           Tiling{"whole B, rows of A", 5000, 300, 600, true, false, false},
           // op(A) fits: widened once, B by columns (a classifier's logits).
           Tiling{"whole A, columns of B", 1000, 8192, 600, false, true, false},
           // C fits: both by blocks of the reduction (a weight's gradient).
           Tiling{"whole C, depth blocks", 500, 1000, 6000, false, false, true},
           // Nothing fits: tiles in all three dimensions.
           Tiling{"tiles everywhere", 3000, 3000, 1100, true, true, true},
       }) {
    SCOPED_TRACE(t.what);
    cpu::HalfGemmTiles tiles = cpu::halfGemmTiles(t.m, t.n, t.k);
    EXPECT_EQ(tiles.rows < t.m, t.rowsSplit);
    EXPECT_EQ(tiles.cols < t.n, t.colsSplit);
    EXPECT_EQ(tiles.depth < t.k, t.depthSplit);
    checkProduct(t.m, t.n, t.k);
  }
}

} // namespace
