//===- NormalizationKernels.h - layernorm, rmsnorm on the CPU ---*- C++ -*-===//
//
// The CPU kernels generated code calls for the normalization family (the
// emission model, NormalizationEmission.cpp, includes this header where a
// model uses them). Rows in parallel; a row's sums in double; the
// per-element arithmetic is NormalizationFormulas.h's. Part of the runtime
// side of the family: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONKERNELS_H
#define MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONKERNELS_H

#include "lang/ops/normalization/NormalizationFormulas.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace mnemo::cpu {

/// Sums in double over kSumLanes running sums, element k of a run into
/// sum k % kSumLanes, combined in a fixed order at the end: one running
/// sum made batch norm's passes wait on each addition's latency (a
/// quarter of ResNet-18's batch-norm time was that chain); independent
/// sums pipeline and vectorize. The order depends only on the element's
/// place, not on threads or the CPU, and a double sum of floats stays far
/// from f32's rounding.
constexpr int kSumLanes = 8;
struct LaneSums {
  double lanes[kSumLanes] = {};
  /// Adds term(0..count) to the lanes, term(s) into lane s % kSumLanes.
  template <typename Term> void add(int64_t count, Term term) {
    int64_t s = 0;
    for (; s + kSumLanes <= count; s += kSumLanes)
      for (int k = 0; k < kSumLanes; ++k)
        lanes[k] += term(s + k);
    for (int k = 0; s < count; ++s, ++k)
      lanes[k] += term(s);
  }
  /// add(count, term) here and add(count, otherTerm) to `other`, in one
  /// pass over the elements.
  template <typename Term, typename OtherTerm>
  void addWith(LaneSums &other, int64_t count, Term term, OtherTerm otherTerm) {
    int64_t s = 0;
    for (; s + kSumLanes <= count; s += kSumLanes)
      for (int k = 0; k < kSumLanes; ++k) {
        lanes[k] += term(s + k);
        other.lanes[k] += otherTerm(s + k);
      }
    for (int k = 0; s < count; ++s, ++k) {
      lanes[k] += term(s);
      other.lanes[k] += otherTerm(s);
    }
  }
  double total() const {
    double pairs[kSumLanes / 2];
    for (int k = 0; k < kSumLanes / 2; ++k)
      pairs[k] = lanes[2 * k] + lanes[2 * k + 1];
    return (pairs[0] + pairs[1]) + (pairs[2] + pairs[3]);
  }
};

/// A row's mean (0 for RMS norm) and reciprocal deviation, summed in double.
/// T: the activations' storage (float, or bf16_t / f16_t where a
/// mixed-precision policy runs layer norm in 16 bits); the arithmetic is
/// f32 and double either way.
/// Both sums run over kSumLanes lanes (LaneSums): a layer norm's backward
/// takes a row's statistics four times over, and one running sum made each
/// wait on every addition (a ViT's layer norm gradients were 13% of its
/// step).
template <typename T>
inline void layerNormRowStatistics(const T *row, int64_t d, float eps, bool rms,
                                   float &mu, float &rstd) {
  double mean = 0;
  if (!rms) {
    LaneSums sum;
    sum.add(d, [&](int64_t j) { return double(float(row[j])); });
    mean = sum.total() / double(d);
  }
  LaneSums squares;
  squares.add(d, [&](int64_t j) {
    double centered = double(float(row[j])) - mean;
    return centered * centered;
  });
  mu = float(mean);
  rstd = float(1.0 / std::sqrt(squares.total() / double(d) + eps));
}

/// Layer norm (bias may be null) or RMS norm over rows of `d`. T: the
/// activations' storage, P: the scale's and bias's.
template <typename T, typename P>
inline void layerNorm(const T *x, const P *scale, const NotDeduced<P> *bias,
                      T *y, int64_t rows, int64_t d, float eps, bool rms) {
  parallelFor(rows, rowGrain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *row = x + r * d;
      float mu, rstd;
      layerNormRowStatistics(row, d, eps, rms, mu, rstd);
      T *out = y + r * d;
      for (int64_t j = 0; j < d; ++j)
        out[j] =
            T(normalization::normalize(float(row[j]), mu, rstd, float(scale[j]),
                                       bias ? float(bias[j]) : 0.0f));
    }
  });
}

/// The gradients of layer norm (or RMS norm: dbias null) over rows of `d`.
template <typename T, typename P>
inline void layerNormGrad(const T *dy, const T *x, const P *scale, T *dx,
                          P *dscale, NotDeduced<P> *dbias, int64_t rows,
                          int64_t d, float eps, bool rms) {
  // A row's statistics are recomputed where needed: cheaper than storing
  // them, and nothing to allocate. Rows in parallel; the scale and bias
  // gradients (sums over rows) in a second pass over columns, so that no
  // two threads add into one sum.
  parallelFor(rows, rowGrain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *row = x + r * d, *g = dy + r * d;
      float mu, rstd;
      layerNormRowStatistics(row, d, eps, rms, mu, rstd);
      LaneSums dxhat, dxhatXhat;
      dxhat.addWith(
          dxhatXhat, d,
          [&](int64_t j) { return double(float(g[j]) * float(scale[j])); },
          [&](int64_t j) {
            return double(float(g[j]) * float(scale[j])) *
                   normalization::normalized(float(row[j]), mu, rstd);
          });
      float a = rms ? 0.0f : float(dxhat.total() / double(d));
      float b = float(dxhatXhat.total() / double(d));
      T *out = dx + r * d;
      for (int64_t j = 0; j < d; ++j)
        out[j] = T(normalization::normalizeInputGrad(
            float(g[j]), float(row[j]), float(scale[j]), mu, rstd, a, b));
    }
  });
  constexpr int64_t kBlock = 64;
  parallelFor((d + kBlock - 1) / kBlock, 1, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      int64_t j0 = block * kBlock, j1 = std::min(d, j0 + kBlock);
      double ds[kBlock] = {}, db[kBlock] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const T *row = x + r * d, *g = dy + r * d;
        float mu, rstd;
        layerNormRowStatistics(row, d, eps, rms, mu, rstd);
        for (int64_t j = j0; j < j1; ++j) {
          ds[j - j0] += double(float(g[j])) *
                        normalization::normalized(float(row[j]), mu, rstd);
          db[j - j0] += float(g[j]);
        }
      }
      for (int64_t j = j0; j < j1; ++j) {
        dscale[j] = P(float(ds[j - j0]));
        if (dbias)
          dbias[j] = P(float(db[j - j0]));
      }
    }
  });
}

/// Batch normalization's data in blocks of `Block` channels (nChw16c,
/// nChw8c: #mnemo.placement's channel_blocked): the element of image i,
/// channel cb * Block + k and place s at ((i * blocks + cb) * inner + s) *
/// Block + k. A block's channels are summed side by side (their sums
/// vectorize across the block), each channel's in the order of its
/// elements.
template <int Block> struct ChannelBlocks {
  int64_t n, blocks, inner;
  template <typename T, typename Visit>
  void forEach(const T *data, int64_t cb, Visit visit) const {
    for (int64_t i = 0; i < n; ++i) {
      const T *p = data + (i * blocks + cb) * inner * Block;
      for (int64_t s = 0; s < inner; ++s)
        visit(i, s, p + s * Block);
    }
  }
  int64_t offset(int64_t i, int64_t cb, int64_t s) const {
    return ((i * blocks + cb) * inner + s) * Block;
  }
  /// body(cb) for every block of channels, blocks in parallel.
  template <typename Body> void forEachBlock(Body body) const {
    parallelFor(blocks, rowGrain(Block * n * inner),
                [&](int64_t begin, int64_t end) {
                  for (int64_t cb = begin; cb < end; ++cb)
                    body(cb);
                });
  }
};

/// The reciprocal standard deviation of a channel from its stored biased
/// variance. The forward, batch_norm_apply and the backward all take it
/// from the f32 variance, so that a recomputed output has the forward's
/// bits.
inline float batchNormRstd(float var, float eps) {
  return float(1.0 / std::sqrt(double(var) + eps));
}

// The batch-norm kernels below take the data (x, y and their gradients) in
// T, f32 or a 16-bit storage type under mixed precision, and the scale,
// bias, statistics and their gradients in f32 always, as PyTorch's; the
// arithmetic is f32 with sums in double either way.

/// y for the block of channels cb from the channels' mean and variance.
template <int Block, typename T>
void batchNormApplyBlock(const ChannelBlocks<Block> &layout, int64_t cb,
                         const T *x, const float *scale, const float *bias,
                         const float *mean, const float *var, T *y, float eps) {
  float mu[Block], rstd[Block], gamma[Block], beta[Block];
  for (int k = 0; k < Block; ++k) {
    int64_t ch = cb * Block + k;
    mu[k] = mean[ch];
    rstd[k] = batchNormRstd(var[ch], eps);
    gamma[k] = scale[ch];
    beta[k] = bias[ch];
  }
  layout.forEach(x, cb, [&](int64_t i, int64_t s, const T *p) {
    T *out = y + layout.offset(i, cb, s);
    for (int k = 0; k < Block; ++k)
      out[k] = T(normalization::normalize(float(p[k]), mu[k], rstd[k], gamma[k],
                                          beta[k]));
  });
}

/// y for channel ch of plain [n, c, inner] data.
template <typename T>
void batchNormApplyChannel(const T *x, const float *scale, const float *bias,
                           const float *mean, const float *var, T *y, int64_t n,
                           int64_t c, int64_t inner, float eps, int64_t ch) {
  float mu = mean[ch], rstd = batchNormRstd(var[ch], eps);
  for (int64_t i = 0; i < n; ++i) {
    const T *p = x + (i * c + ch) * inner;
    T *out = y + (i * c + ch) * inner;
    for (int64_t s = 0; s < inner; ++s)
      out[s] = T(
          normalization::normalize(float(p[s]), mu, rstd, scale[ch], bias[ch]));
  }
}

template <int Block, typename T>
void batchNormBlocked(const T *x, const float *scale, const float *bias, T *y,
                      float *mean, float *var, int64_t n, int64_t c,
                      int64_t inner, float eps) {
  ChannelBlocks<Block> layout{n, c / Block, inner};
  double count = double(n * inner);
  layout.forEachBlock([&](int64_t cb) {
    double sum[Block] = {}, squares[Block] = {}, m[Block];
    layout.forEach(x, cb, [&](int64_t, int64_t, const T *p) {
      for (int k = 0; k < Block; ++k)
        sum[k] += float(p[k]);
    });
    for (int k = 0; k < Block; ++k)
      m[k] = sum[k] / count;
    layout.forEach(x, cb, [&](int64_t, int64_t, const T *p) {
      for (int k = 0; k < Block; ++k) {
        double deviation = float(p[k]) - m[k];
        squares[k] += deviation * deviation;
      }
    });
    for (int k = 0; k < Block; ++k) {
      mean[cb * Block + k] = float(m[k]);
      var[cb * Block + k] = float(squares[k] / count);
    }
    batchNormApplyBlock(layout, cb, x, scale, bias, mean, var, y, eps);
  });
}

template <int Block, typename T>
void batchNormGradBlocked(const T *dy, const T *x, const float *scale,
                          const float *mean, const float *var, T *dx,
                          float *dscale, float *dbias, int64_t n, int64_t c,
                          int64_t inner, float eps) {
  ChannelBlocks<Block> layout{n, c / Block, inner};
  double count = double(n * inner);
  layout.forEachBlock([&](int64_t cb) {
    float mu[Block], rstd[Block];
    for (int k = 0; k < Block; ++k) {
      mu[k] = mean[cb * Block + k];
      rstd[k] = batchNormRstd(var[cb * Block + k], eps);
    }
    double sumDy[Block] = {}, sumDyXhat[Block] = {};
    layout.forEach(x, cb, [&](int64_t i, int64_t s, const T *p) {
      const T *g = dy + layout.offset(i, cb, s);
      for (int k = 0; k < Block; ++k) {
        sumDy[k] += float(g[k]);
        sumDyXhat[k] += double(float(g[k])) *
                        normalization::normalized(float(p[k]), mu[k], rstd[k]);
      }
    });
    float gamma[Block], a[Block], b[Block];
    for (int k = 0; k < Block; ++k) {
      int64_t ch = cb * Block + k;
      dscale[ch] = float(sumDyXhat[k]);
      dbias[ch] = float(sumDy[k]);
      gamma[k] = scale[ch];
      a[k] = float(sumDy[k] * scale[ch] / count);
      b[k] = float(sumDyXhat[k] * scale[ch] / count);
    }
    layout.forEach(x, cb, [&](int64_t i, int64_t s, const T *p) {
      const T *g = dy + layout.offset(i, cb, s);
      T *out = dx + layout.offset(i, cb, s);
      for (int k = 0; k < Block; ++k)
        out[k] = T(normalization::normalizeInputGrad(
            float(g[k]), float(p[k]), gamma[k], mu[k], rstd[k], a[k], b[k]));
    });
  });
}

/// Batch normalization of x [n, c, inner] per channel: each channel's mean
/// and biased variance (summed in double, the variance over deviations)
/// into `mean` and `var`, then y. Channels in parallel. `block`: the
/// channels a block of x and y holds (1: plain NCHW; 8 or 16: blocked, as
/// the run's convolutions chose, cpu::channelBlock()).
template <typename T>
void batchNorm(const T *x, const float *scale, const float *bias, T *y,
               float *mean, float *var, int64_t n, int64_t c, int64_t inner,
               float eps, int64_t block) {
  if (block == 16)
    return batchNormBlocked<16>(x, scale, bias, y, mean, var, n, c, inner, eps);
  if (block == 8)
    return batchNormBlocked<8>(x, scale, bias, y, mean, var, n, c, inner, eps);
  double count = double(n * inner);
  parallelFor(c, rowGrain(n * inner), [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      LaneSums sum;
      for (int64_t i = 0; i < n; ++i) {
        const T *p = x + (i * c + ch) * inner;
        sum.add(inner, [&](int64_t s) { return double(float(p[s])); });
      }
      double m = sum.total() / count;
      LaneSums squares;
      for (int64_t i = 0; i < n; ++i) {
        const T *p = x + (i * c + ch) * inner;
        squares.add(inner, [&](int64_t s) {
          double deviation = float(p[s]) - m;
          return deviation * deviation;
        });
      }
      mean[ch] = float(m);
      var[ch] = float(squares.total() / count);
      batchNormApplyChannel(x, scale, bias, mean, var, y, n, c, inner, eps, ch);
    }
  });
}

/// batch_norm_apply: y from the channels' mean and variance that batchNorm
/// returned, the same bits as its y, in the layout `block` names.
template <typename T>
void batchNormApply(const T *x, const float *scale, const float *bias,
                    const float *mean, const float *var, T *y, int64_t n,
                    int64_t c, int64_t inner, float eps, int64_t block) {
  auto blocked = [&](auto layout) {
    layout.forEachBlock([&](int64_t cb) {
      batchNormApplyBlock(layout, cb, x, scale, bias, mean, var, y, eps);
    });
  };
  if (block == 16)
    return blocked(ChannelBlocks<16>{n, c / 16, inner});
  if (block == 8)
    return blocked(ChannelBlocks<8>{n, c / 8, inner});
  parallelFor(c, rowGrain(n * inner), [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch)
      batchNormApplyChannel(x, scale, bias, mean, var, y, n, c, inner, eps, ch);
  });
}

/// The gradients of batch normalization from the forward's statistics, in
/// the layout batchNorm's `block` names.
template <typename T>
void batchNormGrad(const T *dy, const T *x, const float *scale,
                   const float *mean, const float *var, T *dx, float *dscale,
                   float *dbias, int64_t n, int64_t c, int64_t inner, float eps,
                   int64_t block) {
  if (block == 16)
    return batchNormGradBlocked<16>(dy, x, scale, mean, var, dx, dscale, dbias,
                                    n, c, inner, eps);
  if (block == 8)
    return batchNormGradBlocked<8>(dy, x, scale, mean, var, dx, dscale, dbias,
                                   n, c, inner, eps);
  double count = double(n * inner);
  parallelFor(c, rowGrain(n * inner), [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      float mu = mean[ch], rstd = batchNormRstd(var[ch], eps);
      LaneSums dySums, dyXhatSums;
      for (int64_t i = 0; i < n; ++i) {
        const T *p = x + (i * c + ch) * inner, *g = dy + (i * c + ch) * inner;
        dySums.addWith(
            dyXhatSums, inner, [&](int64_t s) { return double(float(g[s])); },
            [&](int64_t s) {
              return double(float(g[s])) *
                     normalization::normalized(float(p[s]), mu, rstd);
            });
      }
      double sumDy = dySums.total(), sumDyXhat = dyXhatSums.total();
      dscale[ch] = float(sumDyXhat);
      dbias[ch] = float(sumDy);
      float a = float(sumDy * scale[ch] / count);
      float b = float(sumDyXhat * scale[ch] / count);
      for (int64_t i = 0; i < n; ++i) {
        const T *p = x + (i * c + ch) * inner, *g = dy + (i * c + ch) * inner;
        T *out = dx + (i * c + ch) * inner;
        for (int64_t s = 0; s < inner; ++s)
          out[s] = T(normalization::normalizeInputGrad(
              float(g[s]), float(p[s]), scale[ch], mu, rstd, a, b));
      }
    }
  });
}

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_NORMALIZATION_NORMALIZATIONKERNELS_H
