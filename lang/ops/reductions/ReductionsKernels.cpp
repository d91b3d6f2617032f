//===- ReductionsKernels.cpp - sum, mean and max on the CPU ---------------===//
//
// Part of the trainer's runtime (built with the CPU kernels, and copied
// into --emit=project trees): plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/reductions/ReductionsKernels.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <limits>

namespace mnemo::cpu {

namespace {

/// The reduction as [outer, reduced, inner] when the reduced axes are
/// contiguous; false otherwise.
bool asThreeDims(const int64_t *shape, int rank, uint32_t mask, int64_t &outer,
                 int64_t &reduced, int64_t &inner) {
  int first = -1, last = -1;
  for (int i = 0; i < rank; ++i)
    if (mask & (1u << i)) {
      if (first < 0)
        first = i;
      else if (last != i - 1)
        return false;
      last = i;
    }
  outer = reduced = inner = 1;
  for (int i = 0; i < rank; ++i) {
    if (first < 0 || i < first)
      outer *= shape[i];
    else if (i <= last)
      reduced *= shape[i];
    else
      inner *= shape[i];
  }
  return true;
}

/// The elements of a reduction grouped by output element, with neighbouring
/// dimensions of the same kind (kept or reduced) merged: output o's group
/// starts at base(o) and consists of runs() runs of run() elements each,
/// runStride() apart, run q starting runOffset(q) after the base. Fixed-size
/// arrays: kernels allocate nothing while a step runs.
class Groups {
public:
  Groups(const int64_t *shape, int rank, uint32_t mask) {
    for (int i = 0; i < rank; ++i) {
      bool red = mask & (1u << i);
      if (count > 0 && reduced[count - 1] == red) {
        dims[count - 1] *= shape[i];
      } else {
        dims[count] = shape[i];
        reduced[count] = red;
        ++count;
      }
    }
    int64_t stride = 1;
    for (int i = count - 1; i >= 0; --i) {
      strides[i] = stride;
      stride *= dims[i];
    }
    for (int i = 0; i < count; ++i) {
      if (reduced[i]) {
        reducedDims[numReduced++] = i;
        perOutput *= dims[i];
      } else {
        keptDims[numKept++] = i;
        outputs *= dims[i];
      }
    }
  }
  int64_t run() const { return dims[reducedDims[numReduced - 1]]; }
  int64_t runStride() const { return strides[reducedDims[numReduced - 1]]; }
  int64_t runs() const { return perOutput / run(); }
  int64_t base(int64_t o) const {
    int64_t offset = 0;
    for (int j = numKept - 1; j >= 0; --j) {
      offset += o % dims[keptDims[j]] * strides[keptDims[j]];
      o /= dims[keptDims[j]];
    }
    return offset;
  }
  int64_t runOffset(int64_t q) const {
    int64_t offset = 0;
    for (int j = numReduced - 2; j >= 0; --j) {
      offset += q % dims[reducedDims[j]] * strides[reducedDims[j]];
      q /= dims[reducedDims[j]];
    }
    return offset;
  }

  int64_t outputs = 1, perOutput = 1;

private:
  int count = 0, numKept = 0, numReduced = 0;
  int64_t dims[32], strides[32];
  bool reduced[32];
  int keptDims[32], reducedDims[32];
};

} // namespace

template <typename T>
void reduce(ReduceKind kind, const T *x, const int64_t *shape, int rank,
            uint32_t mask, T *out) {
  int64_t outer, r, inner;
  if (!asThreeDims(shape, rank, mask, outer, r, inner)) {
    // Scattered axes (a convolution's bias gradient: [N, C, H, W] over N, H
    // and W): each output element sums its own group, the last reduced
    // dimension walked as a run.
    Groups groups(shape, rank, mask);
    parallelFor(groups.outputs, std::max<int64_t>(1, kGrain / groups.perOutput),
                [&](int64_t begin, int64_t end) {
                  for (int64_t o = begin; o < end; ++o) {
                    int64_t base = groups.base(o);
                    double acc = kind == ReduceKind::Max
                                     ? -std::numeric_limits<double>::infinity()
                                     : 0.0;
                    for (int64_t q = 0; q < groups.runs(); ++q) {
                      const T *p = x + base + groups.runOffset(q);
                      if (kind == ReduceKind::Max) {
                        for (int64_t t = 0; t < groups.run(); ++t)
                          acc = nanMax(
                              acc, double(float(p[t * groups.runStride()])));
                      } else {
                        float partial = 0; // a run in f32, the runs in double
                        for (int64_t t = 0; t < groups.run(); ++t)
                          partial += p[t * groups.runStride()];
                        acc += partial;
                      }
                    }
                    out[o] = T(float(kind == ReduceKind::Mean
                                         ? acc / double(groups.perOutput)
                                         : acc));
                  }
                });
    return;
  }
  float scale = kind == ReduceKind::Mean ? 1.0f / float(r) : 1.0f;
  if (inner == 1) {
    // Contiguous rows: one accumulator per row, in double.
    parallelFor(outer, rowGrain(r), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T *row = x + o * r;
        if (kind == ReduceKind::Max) {
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < r; ++j)
            m = nanMax(m, float(row[j]));
          out[o] = T(m);
        } else {
          double s = 0;
          for (int64_t j = 0; j < r; ++j)
            s += float(row[j]);
          out[o] = T(float(s) * scale);
        }
      }
    });
    return;
  }
  // Columns (a bias gradient: the sum over the batch): split the columns,
  // and run down the reduced axis with a block of accumulators.
  parallelFor(
      outer * inner, std::max<int64_t>(64, kGrain / std::max<int64_t>(1, r)),
      [&](int64_t begin, int64_t end) {
        constexpr int64_t kBlock = 256;
        double acc[kBlock];
        for (int64_t start = begin; start < end;) {
          int64_t o = start / inner, j0 = start % inner;
          int64_t j1 = std::min({inner, j0 + (end - start), j0 + kBlock});
          std::fill(acc, acc + (j1 - j0),
                    kind == ReduceKind::Max
                        ? -std::numeric_limits<double>::infinity()
                        : 0.0);
          for (int64_t k = 0; k < r; ++k) {
            const T *row = x + (o * r + k) * inner;
            if (kind == ReduceKind::Max)
              for (int64_t j = j0; j < j1; ++j)
                acc[j - j0] = nanMax(acc[j - j0], double(float(row[j])));
            else
              for (int64_t j = j0; j < j1; ++j)
                acc[j - j0] += float(row[j]);
          }
          for (int64_t j = j0; j < j1; ++j)
            out[o * inner + j] = T(float(acc[j - j0]) * scale);
          start += j1 - j0;
        }
      });
}

template <typename T>
void maxGrad(const T *grad, const T *x, const T *maximum, const int64_t *shape,
             int rank, uint32_t mask, T *out) {
  Groups groups(shape, rank, mask);
  parallelFor(
      groups.outputs, std::max<int64_t>(1, kGrain / groups.perOutput),
      [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          int64_t base = groups.base(o);
          float m = maximum[o], ties = 0;
          for (int64_t q = 0; q < groups.runs(); ++q)
            for (int64_t t = 0; t < groups.run(); ++t)
              ties +=
                  float(
                      x[base + groups.runOffset(q) + t * groups.runStride()]) ==
                  m;
          float share = float(grad[o]) / ties;
          for (int64_t q = 0; q < groups.runs(); ++q)
            for (int64_t t = 0; t < groups.run(); ++t) {
              int64_t at = base + groups.runOffset(q) + t * groups.runStride();
              out[at] = T(float(x[at]) == m ? share : 0.0f);
            }
        }
      });
}

#define MNEMO_INSTANTIATE_REDUCTIONS(T)                                        \
  template void reduce<T>(ReduceKind, const T *, const int64_t *, int,         \
                          uint32_t, T *);                                      \
  template void maxGrad<T>(const T *, const T *, const T *, const int64_t *,   \
                           int, uint32_t, T *);
MNEMO_INSTANTIATE_REDUCTIONS(float)
MNEMO_INSTANTIATE_REDUCTIONS(bf16_t)
MNEMO_INSTANTIATE_REDUCTIONS(f16_t)
#undef MNEMO_INSTANTIATE_REDUCTIONS

} // namespace mnemo::cpu
