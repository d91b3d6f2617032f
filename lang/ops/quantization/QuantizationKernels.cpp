//===- QuantizationKernels.cpp - Quantization on the CPU ------------------===//
//
// The CPU kernels of the quantization family (declared in
// QuantizationKernels.h), in the trainer's library: observers and fake
// quantization a channel or a row of channels per task, the int8 product
// in 4 x 4 tiles of int32 dot products (AVX-512 VNNI where the build
// targets it), and the sparse products as sgemm on decompressed tiles. The
// arithmetic is QuantizationFormulas.h's.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/quantization/QuantizationKernels.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace mnemo::cpu {

void observeMinMax(int64_t n, int64_t channels, int64_t inner, const float *x,
                   const float *lo, const float *hi, float *newLo, float *newHi,
                   int64_t step, float averaging) {
  // One channel per task: its rows of `inner` elements, [outer, C, inner].
  int64_t outer = n / (channels * inner);
  parallelFor(channels,
              std::max<int64_t>(1, 65536 * channels / std::max<int64_t>(n, 1)),
              [&](int64_t first, int64_t last) {
                for (int64_t c = first; c < last; ++c) {
                  float smallest = std::numeric_limits<float>::infinity();
                  float largest = -smallest;
                  for (int64_t o = 0; o < outer; ++o) {
                    const float *row = x + (o * channels + c) * inner;
                    for (int64_t i = 0; i < inner; ++i) {
                      smallest = std::min(smallest, row[i]);
                      largest = std::max(largest, row[i]);
                    }
                  }
                  newLo[c] = fakequant::observe(lo[c], smallest, step <= 1,
                                                averaging, true);
                  newHi[c] = fakequant::observe(hi[c], largest, step <= 1,
                                                averaging, false);
                }
              });
}

void fakeQuantize(int64_t n, int64_t channels, int64_t inner, const float *x,
                  const float *grad, const float *lo, const float *hi, int qmin,
                  int qmax, bool symmetric, float *out) {
  // Rows of `inner` elements share their channel's parameters: computed
  // once a row, not once an element.
  auto run = [&](int64_t row, int64_t begin, int64_t end) {
    int64_t c = row % channels;
    fakequant::QParams q =
        fakequant::qparams(lo[c], hi[c], qmin, qmax, symmetric);
    for (int64_t e = row * inner + begin; e < row * inner + end; ++e)
      out[e] = grad ? (fakequant::passesGradient(x[e], q, qmin, qmax) ? grad[e]
                                                                      : 0.0f)
                    : fakequant::fakeQuant(x[e], q, qmin, qmax);
  };
  int64_t rows = n / inner;
  if (rows >= 4 * int64_t(threads())) {
    parallelFor(rows, std::max<int64_t>(1, 16384 / inner),
                [&](int64_t first, int64_t last) {
                  for (int64_t r = first; r < last; ++r)
                    run(r, 0, inner);
                });
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    parallelFor(inner, 16384,
                [&](int64_t first, int64_t last) { run(r, first, last); });
}

void quantizeRows(int64_t rows, int64_t k, const float *x, int8_t *codes,
                  float *scale, int32_t *sum) {
  parallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
              [&](int64_t first, int64_t last) {
                for (int64_t m = first; m < last; ++m) {
                  const float *row = x + m * k;
                  float absMax = 0.0f;
                  for (int64_t c = 0; c < k; ++c) // NaN: see rowCode
                    absMax = std::max(absMax, std::isnan(row[c])
                                                  ? INFINITY
                                                  : std::fabs(row[c]));
                  float rowScale = fakequant::rowScale(absMax);
                  float inverse = 1.0f / rowScale;
                  int32_t total = 0;
                  for (int64_t c = 0; c < k; ++c) {
                    int code = fakequant::rowCode(row[c], inverse);
                    codes[m * k + c] = int8_t(code);
                    total += code;
                  }
                  scale[m] = rowScale;
                  sum[m] = total;
                }
              });
}

namespace {
/// The int32 dot products of 4 activation rows by 4 weight rows (rows past
/// the matrix repeat its last one; the caller reads what exists): each row
/// is read once per tile.
void int8Tile(int64_t k, const int8_t *const *xRows, const int8_t *const *wRows,
              int32_t acc[4][4]) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  // vpdpbusd multiplies unsigned by signed bytes, 64 products an
  // instruction: the activations' codes in [-127, 127] go in offset by 128
  // (their sign bit flipped), and 128 * sum(w) comes back off.
  __m512i sums[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      sums[i][j] = _mm512_setzero_si512();
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  __m512i wTotals[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(),
                        _mm512_setzero_si512(), _mm512_setzero_si512()};
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t c = 0; c < k; c += 64) {
    __mmask64 lanes =
        k - c >= 64 ? ~__mmask64(0) : (__mmask64(1) << (k - c)) - 1;
    __m512i xs[4], ws[4];
    for (int i = 0; i < 4; ++i)
      xs[i] =
          _mm512_xor_si512(_mm512_maskz_loadu_epi8(lanes, xRows[i] + c), flip);
    for (int j = 0; j < 4; ++j) {
      ws[j] = _mm512_maskz_loadu_epi8(lanes, wRows[j] + c);
      wTotals[j] = _mm512_dpbusd_epi32(wTotals[j], ones, ws[j]);
    }
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        sums[i][j] = _mm512_dpbusd_epi32(sums[i][j], xs[i], ws[j]);
  }
  for (int j = 0; j < 4; ++j) {
    int32_t offset = 128 * _mm512_reduce_add_epi32(wTotals[j]);
    for (int i = 0; i < 4; ++i)
      acc[i][j] = _mm512_reduce_add_epi32(sums[i][j]) - offset;
  }
#else
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int8_t *a = xRows[i], *b = wRows[j];
      int32_t total = 0;
      for (int64_t c = 0; c < k; ++c)
        total += int32_t(a[c]) * int32_t(b[c]);
      acc[i][j] = total;
    }
#endif
}
} // namespace

void matmulInt8(int64_t rows, int64_t n, int64_t k, const int8_t *x,
                const float *xScale, const int32_t *xSum, const int8_t *w,
                const float *wScale, const int32_t *wZeroPoint, float *out) {
  // Blocks of 4 output channels per task; a task sweeps every row, so the
  // weight rows stay in L1 while the activations stream through L2.
  int64_t channelBlocks = (n + 3) / 4;
  parallelFor(channelBlocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t nb = first; nb < last; ++nb) {
      int64_t j0 = 4 * nb;
      int nr = int(std::min<int64_t>(4, n - j0));
      const int8_t *wRows[4];
      for (int j = 0; j < 4; ++j)
        wRows[j] = w + std::min<int64_t>(j0 + j, n - 1) * k;
      for (int64_t m0 = 0; m0 < rows; m0 += 4) {
        int mr = int(std::min<int64_t>(4, rows - m0));
        const int8_t *xRows[4];
        for (int i = 0; i < 4; ++i)
          xRows[i] = x + std::min<int64_t>(m0 + i, rows - 1) * k;
        int32_t acc[4][4];
        int8Tile(k, xRows, wRows, acc);
        for (int i = 0; i < mr; ++i)
          for (int j = 0; j < nr; ++j)
            out[(m0 + i) * n + j0 + j] = fakequant::int8Rescale(
                acc[i][j], wZeroPoint[j0 + j], xSum[m0 + i], xScale[m0 + i],
                wScale[j0 + j]);
      }
    }
  });
}

void dequantize(int64_t n, int64_t channels, int bits, const int8_t *codes,
                const float *scale, const int32_t *zeroPoint, float *out) {
  int64_t inner = n / channels;
  const signed char *packed = reinterpret_cast<const signed char *>(codes);
  parallelFor(n, 16384, [&](int64_t first, int64_t last) {
    for (int64_t e = first; e < last; ++e) {
      int code = bits == 8 ? int(codes[e]) : fakequant::int4Code(packed, e);
      out[e] =
          fakequant::dequantized(code, zeroPoint[e / inner], scale[e / inner]);
    }
  });
}

void matmulSparse24(int64_t rows, int64_t n, int64_t k, const float *x,
                    const float *values, const int8_t *indices, float *scratch,
                    float *out) {
  // The CPU has no sparse tensor cores: a tile of output channels is
  // decompressed into the workspace (kSparseTileRows x k f32) and goes
  // through sgemm, so the packed weight costs a dense product's time and
  // half its bytes.
  for (int64_t j0 = 0; j0 < n; j0 += kSparseTileRows) {
    int64_t tile = std::min<int64_t>(kSparseTileRows, n - j0);
    parallelFor(tile, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        int64_t j = j0 + t;
        const signed char *rowIndices =
            reinterpret_cast<const signed char *>(indices + j * (k / 8));
        const float *rowValues = values + j * (k / 2);
        float *dense = scratch + t * k;
        for (int64_t g = 0; g < k / 4; ++g) {
          dense[4 * g] = dense[4 * g + 1] = dense[4 * g + 2] =
              dense[4 * g + 3] = 0.0f;
          for (int kept = 0; kept < 2; ++kept)
            dense[4 * g + fakequant::sparse24Position(rowIndices, g, kept)] +=
                rowValues[2 * g + kept];
        }
      }
    });
    gemm(false, true, rows, tile, k, 1.0f, x, k, scratch, k, 0.0f, out + j0, n);
  }
}

void matmulCsr(int64_t rows, int64_t n, int64_t k, int64_t capacity,
               const float *x, const float *values, const int16_t *columns16,
               const int32_t *columns32, const int32_t *rowOffsets,
               float *scratch, float *out) {
  // The offsets and columns come from a file: checked before use, so that
  // a bad export is an error rather than a wild read.
  for (int64_t j = 0; j < n; ++j)
    if (rowOffsets[j] < 0 || rowOffsets[j] > rowOffsets[j + 1] ||
        rowOffsets[j + 1] > capacity) {
      reportError("a CSR weight's row offsets must rise from 0 to at most "
                  "its " +
                  std::to_string(capacity) + " stored nonzeros");
      return;
    }
  for (int64_t e = 0; e < rowOffsets[n]; ++e) {
    int64_t c = columns16 ? columns16[e] : columns32[e];
    if (c < 0 || c >= k) {
      reportError("a CSR weight's column " + std::to_string(c) +
                  " is out of range for depth " + std::to_string(k));
      return;
    }
  }
  // As the 2:4 product: tiles of output channels scattered into the
  // workspace, then sgemm. Gathering each row's nonzeros from every
  // activation row ran 20x slower than the dense product at 50% sparsity:
  // a CPU gains from CSR in bytes, not in time, until far sparser weights.
  for (int64_t j0 = 0; j0 < n; j0 += kSparseTileRows) {
    int64_t tile = std::min<int64_t>(kSparseTileRows, n - j0);
    parallelFor(tile, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        float *dense = scratch + t * k;
        std::fill(dense, dense + k, 0.0f);
        for (int64_t e = rowOffsets[j0 + t]; e < rowOffsets[j0 + t + 1]; ++e)
          dense[columns16 ? columns16[e] : columns32[e]] += values[e];
      }
    });
    gemm(false, true, rows, tile, k, 1.0f, x, k, scratch, k, 0.0f, out + j0, n);
  }
}

} // namespace mnemo::cpu
