//===- ConvolutionKernels.h - Convolutions on the CPU -----------*- C++ -*-===//
//
// The CPU kernels generated code calls for conv2d and its backward ops (the
// emission model, ConvolutionEmission.cpp, includes this header where a
// model has convolutions; the definitions are in ConvolutionKernels.cpp, in
// the trainer's library). Part of the runtime side of the family: plain
// C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_CONVOLUTION_CONVOLUTIONKERNELS_H
#define MNEMO_LANG_OPS_CONVOLUTION_CONVOLUTIONKERNELS_H

#include <cstdint>
#include <memory>
#include <string>

namespace mnemo::cpu {

/// NCHW convolution with an OIHW weight, by im2col and GEMM over
/// `imagesPerGemm` images at a time in `workspace`: their columns
/// [C*KH*KW, n*HO*WO], then (gradients) the output gradient gathered as
/// [O, n*HO*WO]. The ops declare its size and imagesPerGemm
/// (ConvolutionOps.cpp).
struct ConvShape {
  int64_t n, c, h, w; // input
  int64_t o, kh, kw;  // weight
  int64_t ho, wo;     // output
  int64_t strideH, strideW, padH, padW;
  int64_t imagesPerGemm;
};
void conv2d(const ConvShape &s, const float *x, const float *w, float *y,
            float *workspace);
void conv2dInputGrad(const ConvShape &s, const float *dy, const float *w,
                     float *dx, float *workspace);
void conv2dWeightGrad(const ConvShape &s, const float *dy, const float *x,
                      float *dw, float *workspace);

/// Which computation of a convolution a site runs: Forward (x, w) -> y,
/// InputGrad (dy, w) -> dx, WeightGrad (dy, x) -> dw.
enum class ConvKind : int { Forward = 0, InputGrad = 1, WeightGrad = 2 };

/// The element type of a site's operands and result: f32, or a 16-bit
/// storage type under mixed precision (bf16_t, f16_t: runtime/cpu/Half.h).
enum class ConvData : int { F32 = 0, BF16 = 1, F16 = 2 };

/// Which of a site's activations the plan keeps in blocks of channels
/// (#mnemo.placement's channel_blocked; never the weights or their
/// gradient): Forward's x and y, InputGrad's dy and dx, WeightGrad's dy
/// and x, as first / second / result.
struct ConvLayouts {
  bool firstBlocked = false, secondBlocked = false, resultBlocked = false;
  bool any() const { return firstBlocked || secondBlocked || resultBlocked; }
};

/// The channels one block of a channel-blocked activation holds in this
/// run: 16 (nChw16c) or 8 (nChw8c), the layout oneDNN's convolutions take
/// on this CPU, when every site that reads or writes such activations runs
/// through oneDNN in it; else 1, and those activations are plain NCHW like
/// all others. prepareConvolutions decides it before the first step; batch
/// norm's kernels read it.
int64_t channelBlock();

/// One convolution op of the generated code (the generated file holds
/// it as a namespace-scope object), set up before the first step by
/// prepareConvolutions. With oneDNN (a trainer built
/// where libdnnl-dev is installed): oneDNN's primitive for this shape on
/// this CPU, reading and writing the layouts oneDNN picks (nChw16c on
/// AVX-512, nChw8c on AVX2), with reorders from and to the plan's NCHW
/// activations and OIHW weights each call, split over the step's threads
/// (ConvolutionSiteKernels.cpp says how), none for an activation the plan
/// already keeps blocked (ConvLayouts); the blocked copies live in the
/// workspace the plan gave the op, and a site whose needs do not fit there
/// (or whose primitive would need a scratchpad) runs im2col and
/// sgemm instead (as does every site without oneDNN, and every site when
/// MNEMO_ONEDNN=0 is in the environment). Either way a step uses exactly
/// the plan's memory. On 16-bit storage, oneDNN's 16-bit convolution
/// (f32 accumulation, the result rounded once) where this CPU has one
/// that is not oneDNN's reference code (bf16 on AVX-512), else the
/// im2col kernels around widened operands (conv2dHalf); the plan's
/// workspace holds either.
class ConvSite {
public:
  ConvSite(const ConvShape &shape, ConvKind kind, int64_t workspaceBytes,
           ConvLayouts layouts = {}, ConvData data = ConvData::F32);
  ~ConvSite();
  ConvSite(const ConvSite &) = delete;
  ConvSite &operator=(const ConvSite &) = delete;

  /// Sets up oneDNN's primitives for `threads` parts, its blocked
  /// activations in blocks of `block` channels (see prepareConvolutions);
  /// until then the site runs im2col.
  void prepare(int threads, int64_t block);

  /// Forward: first = x, second = w, result = y; InputGrad: dy, w, dx;
  /// WeightGrad: dy, x, dw, of the site's ConvData (T: float, bf16_t or
  /// f16_t). `workspace` holds workspaceBytes.
  template <typename T>
  void run(const T *first, const T *second, T *result, float *workspace) const;

  /// oneDNN's implementation ("jit:avx512_core"), or why im2col runs.
  const std::string &implementation() const { return how; }
  bool usesOneDnn() const { return dnn != nullptr; }
  /// Whether the plan keeps any of its activations channel-blocked.
  bool readsBlocked() const { return layouts.any(); }

  struct OneDnn;

private:
  /// oneDNN's primitives on the step's pointers; false where it has none.
  bool runOneDnn(const void *first, const void *second, void *result,
                 float *workspace) const;

  ConvShape shape;
  ConvKind kind;
  int64_t workspaceBytes;
  ConvLayouts layouts;
  ConvData data;
  std::string how;
  std::unique_ptr<OneDnn> dnn;
};

/// Sets up every site of the program for the step's threads, and decides
/// channelBlock(): the block oneDNN prefers on this CPU, or 1 where a
/// site that reads or writes blocked activations cannot run through
/// oneDNN in it (then every site is set up again for plain activations).
/// The trainer and the inference program call it once, after setting the
/// thread count and before the first step.
void prepareConvolutions(int threads);

/// What the program's convolution sites run, for the trainer's start-up
/// lines: "oneDNN (jit:avx512_core) at 6 of 6 convolutions", or empty
/// when it has none.
std::string convolutionSummary();

/// A convolution (kind 0 forward, 1 input gradient, 2 weight gradient) on
/// 16-bit storage: operands widened into `workspace` after the f32
/// kernel's own scratch, computed in f32, the result narrowed.
template <typename T>
void conv2dHalf(int kind, const ConvShape &s, const T *first, const T *second,
                T *result, float *workspace);

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_CONVOLUTION_CONVOLUTIONKERNELS_H
