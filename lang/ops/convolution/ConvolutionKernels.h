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

namespace mnemo {
namespace cpu {

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

/// A convolution (kind 0 forward, 1 input gradient, 2 weight gradient) on
/// 16-bit storage: operands widened into `workspace` after the f32
/// kernel's own scratch, computed in f32, the result narrowed.
template <typename T>
void conv2dHalf(int kind, const ConvShape &s, const T *first, const T *second,
                T *result, float *workspace);

} // namespace cpu
} // namespace mnemo

#endif // MNEMO_LANG_OPS_CONVOLUTION_CONVOLUTIONKERNELS_H
