//===- attention_cudnn_check.cu - cuDNN's fused attention against a reference
//===//
//
// Runs the cuDNN attention plans (lang/ops/attention/AttentionCudnn.h) on
// the GPU for a set of shapes (causal or not, a length that is no multiple
// of a tile, head dimension 128, grouped-query heads, half and bfloat16,
// dropout) and compares the output, the log-sum-exp and the three
// gradients with a reference computed here in double from the same
// 16-bit inputs. Dropout is checked through an identity value matrix: then
// the output is the dropped probabilities themselves, which shows the mask
// cuDNN drew, and the backward is checked against that mask. Prints which
// form of the graph and which engine cuDNN took, and the time of a
// GPT-2-small-sized forward and backward. Exit status 1 on a mismatch or
// when a shape every cuDNN 9 takes gets no plan.
//
// Built and run by scripts/gpu-check.sh (build stage); configured here by
// its dry run.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/attention/AttentionCudnn.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using mnemo::attention::CudnnAttentionBackwardArgs;
using mnemo::attention::CudnnAttentionForwardArgs;
using mnemo::attention::CudnnAttentionPlan;
using mnemo::attention::CudnnAttentionShape;

namespace {

#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t e = (call);                                                    \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                  \
                   cudaGetErrorString(e));                                     \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

struct Case {
  const char *name;
  int64_t b, h, hk, sq, skv, d, dv;
  bool causal;
  double dropout;
  cudnnDataType_t type;
  /// Whether every cuDNN 9 on a Hopper GPU has an engine for it (a missing
  /// plan is then a failure, else a note).
  bool required;
};

/// 16-bit storage of a float, and back (round to nearest even).
uint16_t toBits(float x, cudnnDataType_t type) {
  if (type == CUDNN_DATA_HALF) {
    __half h = __float2half_rn(x);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    return bits;
  }
  __nv_bfloat16 h = __float2bfloat16_rn(x);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
float fromBits(uint16_t bits, cudnnDataType_t type) {
  if (type == CUDNN_DATA_HALF) {
    __half h;
    std::memcpy(&h, &bits, 2);
    return __half2float(h);
  }
  __nv_bfloat16 h;
  std::memcpy(&h, &bits, 2);
  return __bfloat162float(h);
}

struct DeviceBuffer {
  void *p = nullptr;
  explicit DeviceBuffer(size_t bytes) { CHECK_CUDA(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
};

/// The largest difference relative to the reference's largest magnitude.
double relativeError(const std::vector<double> &got,
                     const std::vector<double> &want) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return diff / scale;
}

struct Tensors {
  std::vector<uint16_t> q, k, v, dO;
};

/// The reference: forward and backward in double; `keep` (when non-empty)
/// is the dropout mask cuDNN drew, [b, h, sq, skv].
struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};
Reference reference(const Case &c, const Tensors &t,
                    const std::vector<char> &keep) {
  Reference r;
  auto val = [&](const std::vector<uint16_t> &x, size_t i) {
    return double(fromBits(x[i], c.type));
  };
  double scale = 1.0 / std::sqrt(double(c.d));
  double dropScale = 1.0 / (1.0 - c.dropout);
  r.o.assign(c.b * c.h * c.sq * c.dv, 0);
  r.lse.assign(c.b * c.h * c.sq, 0);
  r.dq.assign(c.b * c.h * c.sq * c.d, 0);
  r.dk.assign(c.b * c.hk * c.skv * c.d, 0);
  r.dv.assign(c.b * c.hk * c.skv * c.dv, 0);
  std::vector<double> p(c.skv), dp(c.skv);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h) {
      int64_t kh = h / (c.h / c.hk);
      size_t qBase = (b * c.h + h) * c.sq, kBase = (b * c.hk + kh) * c.skv;
      for (int64_t i = 0; i < c.sq; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j < c.skv; ++j) {
          double s = 0;
          for (int64_t x = 0; x < c.d; ++x)
            s += val(t.q, (qBase + i) * c.d + x) *
                 val(t.k, (kBase + j) * c.d + x);
          p[j] = (c.causal && j > i) ? -INFINITY : s * scale;
          m = std::max(m, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < c.skv; ++j)
          sum += (p[j] = std::exp(p[j] - m));
        r.lse[qBase + i] = m + std::log(sum);
        auto factor = [&](int64_t j) {
          if (c.dropout == 0)
            return 1.0;
          return keep[(qBase + i) * c.skv + j] ? dropScale : 0.0;
        };
        for (int64_t j = 0; j < c.skv; ++j)
          p[j] /= sum;
        double rowDot = 0;
        for (int64_t x = 0; x < c.dv; ++x) {
          double o = 0;
          for (int64_t j = 0; j < c.skv; ++j)
            o += p[j] * factor(j) * val(t.v, (kBase + j) * c.dv + x);
          r.o[(qBase + i) * c.dv + x] = o;
          rowDot += o * val(t.dO, (qBase + i) * c.dv + x);
        }
        for (int64_t j = 0; j < c.skv; ++j) {
          double g = 0;
          for (int64_t x = 0; x < c.dv; ++x)
            g += val(t.dO, (qBase + i) * c.dv + x) *
                 val(t.v, (kBase + j) * c.dv + x);
          dp[j] = p[j] * (g * factor(j) - rowDot);
          for (int64_t x = 0; x < c.dv; ++x)
            r.dv[(kBase + j) * c.dv + x] +=
                p[j] * factor(j) * val(t.dO, (qBase + i) * c.dv + x);
        }
        for (int64_t j = 0; j < c.skv; ++j)
          for (int64_t x = 0; x < c.d; ++x) {
            r.dq[(qBase + i) * c.d + x] +=
                scale * dp[j] * val(t.k, (kBase + j) * c.d + x);
            r.dk[(kBase + j) * c.d + x] +=
                scale * dp[j] * val(t.q, (qBase + i) * c.d + x);
          }
      }
    }
  return r;
}

std::vector<double> download16(const void *p, size_t n, cudnnDataType_t type) {
  std::vector<uint16_t> bits(n);
  CHECK_CUDA(cudaMemcpy(bits.data(), p, n * 2, cudaMemcpyDeviceToHost));
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = fromBits(bits[i], type);
  return out;
}

/// One case: false when it fails.
bool runCase(cudnnHandle_t handle, const Case &c) {
  CudnnAttentionShape shape{
      c.b,       c.h,      c.hk,
      c.sq,      c.skv,    c.d,
      c.dv,      c.causal, float(1.0 / std::sqrt(double(c.d))),
      c.dropout, c.type};
  std::string why;
  auto forward = CudnnAttentionPlan::forward(handle, shape, why);
  if (!forward) {
    std::printf("%-34s forward: no plan (%s)\n", c.name, why.c_str());
    return !c.required;
  }
  auto backward = CudnnAttentionPlan::backward(handle, shape, why);
  if (!backward) {
    std::printf("%-34s forward: %s; backward: no plan (%s)\n", c.name,
                forward->description().c_str(), why.c_str());
    return !c.required;
  }
  std::mt19937 random(1234);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  Tensors t;
  auto fill = [&](std::vector<uint16_t> &x, size_t n) {
    x.resize(n);
    for (auto &e : x)
      e = toBits(uniform(random), c.type);
  };
  fill(t.q, c.b * c.h * c.sq * c.d);
  fill(t.k, c.b * c.hk * c.skv * c.d);
  fill(t.v, c.b * c.hk * c.skv * c.dv);
  fill(t.dO, c.b * c.h * c.sq * c.dv);
  if (c.dropout > 0) // an identity value: the output shows the mask
    for (int64_t bh = 0; bh < c.b * c.hk; ++bh)
      for (int64_t j = 0; j < c.skv; ++j)
        for (int64_t x = 0; x < c.dv; ++x)
          t.v[(bh * c.skv + j) * c.dv + x] = toBits(j == x ? 1.f : 0.f, c.type);
  DeviceBuffer q(t.q.size() * 2), k(t.k.size() * 2), v(t.v.size() * 2),
      dO(t.dO.size() * 2), o(t.dO.size() * 2), lse(c.b * c.h * c.sq * 4),
      dq(t.q.size() * 2), dk(t.k.size() * 2), dv(t.v.size() * 2),
      scratch(CudnnAttentionPlan::scratchBytes(shape)),
      workspace(std::max<int64_t>(256, std::max(forward->workspaceBytes(),
                                                backward->workspaceBytes()))),
      seedOffset(16);
  CHECK_CUDA(
      cudaMemcpy(q.p, t.q.data(), t.q.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(
      cudaMemcpy(k.p, t.k.data(), t.k.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(
      cudaMemcpy(v.p, t.v.data(), t.v.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(
      cudaMemcpy(dO.p, t.dO.data(), t.dO.size() * 2, cudaMemcpyHostToDevice));
  int64_t seedOffsetHost[2] = {20261204, 7};
  CHECK_CUDA(
      cudaMemcpy(seedOffset.p, seedOffsetHost, 16, cudaMemcpyHostToDevice));
  const int64_t *seed = static_cast<const int64_t *>(seedOffset.p);
  CudnnAttentionForwardArgs fa{
      q.p, k.p, v.p, o.p, static_cast<float *>(lse.p), seed, seed + 1};
  int64_t rows = c.b * c.h * c.sq;
  float *rowDot = static_cast<float *>(scratch.p);
  float *accumulator = reinterpret_cast<float *>(
      static_cast<char *>(scratch.p) + (rows * 4 + 255) / 256 * 256);
  CudnnAttentionBackwardArgs ba{
      q.p,      k.p,    v.p,        o.p,  static_cast<float *>(lse.p),
      dO.p,     dq.p,   dk.p,       dv.p, seed,
      seed + 1, rowDot, accumulator};
  cudnnStatus_t status = forward->run(handle, nullptr, fa, workspace.p);
  if (status == CUDNN_STATUS_SUCCESS)
    status = backward->run(handle, nullptr, ba, workspace.p);
  CHECK_CUDA(cudaDeviceSynchronize());
  if (status != CUDNN_STATUS_SUCCESS) {
    std::printf("%-34s FAIL: execution: %s\n", c.name,
                cudnnGetErrorString(status));
    return false;
  }
  std::vector<double> gotO = download16(o.p, t.dO.size(), c.type);
  std::vector<char> keep;
  bool ok = true;
  std::string notes;
  if (c.dropout > 0) {
    // With V = I, o[i, j] = p_ij * keep_ij / (1 - p): the mask is where it
    // is not zero (every probability here is far from 0).
    keep.resize(gotO.size());
    int64_t dropped = 0;
    for (size_t i = 0; i < gotO.size(); ++i) {
      keep[i] = gotO[i] != 0;
      dropped += !keep[i];
    }
    double fraction = double(dropped) / double(gotO.size());
    double sigma = std::sqrt(c.dropout * (1 - c.dropout) / double(gotO.size()));
    char text[128];
    std::snprintf(text, sizeof(text), ", dropped %.4f (p %.2f)", fraction,
                  c.dropout);
    notes += text;
    // Five standard deviations: a wrong probability or a mask of all ones
    // fails; chance does not (p < 1e-6).
    ok &= std::fabs(fraction - c.dropout) < 5 * sigma;
  }
  Reference want = reference(c, t, keep);
  std::vector<float> gotLseF(rows);
  CHECK_CUDA(
      cudaMemcpy(gotLseF.data(), lse.p, rows * 4, cudaMemcpyDeviceToHost));
  std::vector<double> gotLse(gotLseF.begin(), gotLseF.end());
  double lseError = 0;
  for (int64_t i = 0; i < rows; ++i)
    lseError = std::max(lseError, std::fabs(gotLse[i] - want.lse[i]));
  double eO = relativeError(gotO, want.o);
  double eQ = relativeError(download16(dq.p, t.q.size(), c.type), want.dq);
  double eK = relativeError(download16(dk.p, t.k.size(), c.type), want.dk);
  double eV = relativeError(download16(dv.p, t.v.size(), c.type), want.dv);
  // Tolerances: the inputs are the same 16-bit numbers on both sides; cuDNN
  // rounds the probabilities to 16 bits before the second product and the
  // results to 16 bits (bfloat16: 2^-8 relative, 3.9e-3), and sums in f32.
  // A few roundings of 2^-8 stay under 2e-2 of the largest element; a wrong
  // scale, mask or transpose is off by far more. The log-sum-exp is f32
  // from f32 sums of 16-bit products: 1e-2 absolute.
  double tolerance = 2e-2;
  ok &= eO < tolerance && eQ < tolerance && eK < tolerance && eV < tolerance &&
        lseError < 1e-2;
  std::printf("%-34s %s  o %.1e  lse %.1e  dq %.1e  dk %.1e  dv %.1e%s\n"
              "    forward: %s\n    backward: %s\n",
              c.name, ok ? "ok  " : "FAIL", eO, lseError, eQ, eK, eV,
              notes.c_str(), forward->description().c_str(),
              backward->description().c_str());
  return ok;
}

/// Milliseconds per forward and per backward at GPT-2 small's attention
/// (batch 8, 12 heads, 1024 tokens, head 64, causal, dropout 0.1).
void timeGpt2(cudnnHandle_t handle) {
  CudnnAttentionShape shape{
      8, 12, 12, 1024, 1024, 64, 64, true, 0.125f, 0.1, CUDNN_DATA_BFLOAT16};
  std::string why;
  auto forward = CudnnAttentionPlan::forward(handle, shape, why);
  auto backward =
      forward ? CudnnAttentionPlan::backward(handle, shape, why) : nullptr;
  if (!forward || !backward) {
    std::printf("GPT-2 small attention: no plan (%s)\n", why.c_str());
    return;
  }
  size_t n = 8 * 12 * 1024 * 64;
  DeviceBuffer q(n * 2), k(n * 2), v(n * 2), o(n * 2), dO(n * 2),
      lse(8 * 12 * 1024 * 4), dq(n * 2), dk(n * 2), dv(n * 2),
      scratch(CudnnAttentionPlan::scratchBytes(shape)),
      workspace(std::max<int64_t>(256, std::max(forward->workspaceBytes(),
                                                backward->workspaceBytes()))),
      seedOffset(16);
  CHECK_CUDA(cudaMemset(q.p, 0x3c, n * 2));
  CHECK_CUDA(cudaMemset(k.p, 0x3c, n * 2));
  CHECK_CUDA(cudaMemset(v.p, 0x3c, n * 2));
  CHECK_CUDA(cudaMemset(dO.p, 0x3c, n * 2));
  CHECK_CUDA(cudaMemset(seedOffset.p, 0, 16));
  const int64_t *seed = static_cast<const int64_t *>(seedOffset.p);
  int64_t rows = 8 * 12 * 1024;
  float *rowDot = static_cast<float *>(scratch.p);
  float *accumulator = reinterpret_cast<float *>(
      static_cast<char *>(scratch.p) + (rows * 4 + 255) / 256 * 256);
  CudnnAttentionForwardArgs fa{
      q.p, k.p, v.p, o.p, static_cast<float *>(lse.p), seed, seed + 1};
  CudnnAttentionBackwardArgs ba{
      q.p,      k.p,    v.p,        o.p,  static_cast<float *>(lse.p),
      dO.p,     dq.p,   dk.p,       dv.p, seed,
      seed + 1, rowDot, accumulator};
  cudaEvent_t start, middle, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&middle);
  cudaEventCreate(&stop);
  const int repeats = 20;
  for (int warm = 0; warm < 3; ++warm) {
    forward->run(handle, nullptr, fa, workspace.p);
    backward->run(handle, nullptr, ba, workspace.p);
  }
  float forwardMs = 0, backwardMs = 0;
  for (int r = 0; r < repeats; ++r) {
    cudaEventRecord(start);
    forward->run(handle, nullptr, fa, workspace.p);
    cudaEventRecord(middle);
    backward->run(handle, nullptr, ba, workspace.p);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float f = 0, b = 0;
    cudaEventElapsedTime(&f, start, middle);
    cudaEventElapsedTime(&b, middle, stop);
    forwardMs += f;
    backwardMs += b;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::printf("GPT-2 small attention (b8 h12 1024x1024 d64 causal, dropout "
              "0.1, bf16): forward %.3f ms, backward %.3f ms per layer\n"
              "    forward: %s\n    backward: %s\n",
              forwardMs / repeats, backwardMs / repeats,
              forward->description().c_str(), backward->description().c_str());
}

} // namespace

int main() {
  cudnnHandle_t handle;
  if (cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cannot create a cuDNN handle (no GPU?)\n");
    return 2;
  }
  std::printf("cuDNN %zu\n", cudnnGetVersion());
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f16 = CUDNN_DATA_HALF;
  const Case cases[] = {
      {"bf16 b2 h4 128x128 d64", 2, 4, 4, 128, 128, 64, 64, false, 0, bf16,
       true},
      {"bf16 causal 128x128 d64", 2, 4, 4, 128, 128, 64, 64, true, 0, bf16,
       true},
      {"bf16 causal 200x200 d64", 2, 4, 4, 200, 200, 64, 64, true, 0, bf16,
       true},
      {"bf16 causal 256x256 d128", 1, 4, 4, 256, 256, 128, 128, true, 0, bf16,
       true},
      {"f16 causal 128x128 d64", 2, 4, 4, 128, 128, 64, 64, true, 0, f16, true},
      {"bf16 GQA h8 kv2 causal 128 d64", 2, 8, 2, 128, 128, 64, 64, true, 0,
       bf16, false},
      {"bf16 dropout 0.25 96x64 d64", 2, 4, 4, 96, 64, 64, 64, false, 0.25,
       bf16, true},
  };
  bool ok = true;
  for (const Case &c : cases)
    ok &= runCase(handle, c);
  timeGpt2(handle);
  cudnnDestroy(handle);
  std::printf("%s\n", ok ? "attention-cudnn-check: all cases agree"
                         : "attention-cudnn-check: FAILED");
  return ok ? 0 : 1;
}
