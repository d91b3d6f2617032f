//===- ConvolutionInterpreter.cpp - Convolutions in the interpreter -------===//
//
// The interpreter's model of conv2d and its backward ops: the definition's
// seven nested loops over the forward convolution's indices, accumulating
// in double into the result (the output, the input's gradient or the
// weight's). It shares nothing with the kernels' im2col and sgemm, or with
// cuDNN.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// Which convolution product an op accumulates: the output (from the input
/// and the weight), the input's gradient (from the output's gradient and
/// the weight) or the weight's (from the output's gradient and the input).
enum class ConvProduct { Output, InputGrad, WeightGrad };

template <typename Op, ConvProduct which>
LogicalResult interpretConvolution(Op op, OpContext &context) {
  const Tensor &a = context.get(op->getOperand(0)),
               &b = context.get(op->getOperand(1));
  Tensor out = context.like(op->getResult(0));
  // Name everything by the forward convolution: x [N,C,H,W], w [O,C,KH,KW],
  // y [N,O,HO,WO].
  const std::vector<int64_t> &xs = which == ConvProduct::Output      ? a.shape
                                   : which == ConvProduct::InputGrad ? out.shape
                                                                     : b.shape;
  const std::vector<int64_t> &ws =
      which == ConvProduct::WeightGrad ? out.shape : b.shape;
  const std::vector<int64_t> &ys =
      which == ConvProduct::Output ? out.shape : a.shape;
  ArrayRef<int64_t> stride = op.getStride(), padding = op.getPadding();
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  int64_t O = ws[0], KH = ws[2], KW = ws[3], HO = ys[2], WO = ys[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < HO; ++oh)
        for (int64_t ow = 0; ow < WO; ++ow) {
          int64_t yi = ((n * O + o) * HO + oh) * WO + ow;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t ih = oh * stride[0] - padding[0] + kh;
              if (ih < 0 || ih >= H)
                continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t iw = ow * stride[1] - padding[1] + kw;
                if (iw < 0 || iw >= W)
                  continue;
                int64_t xi = ((n * C + c) * H + ih) * W + iw;
                int64_t wi = ((o * C + c) * KH + kh) * KW + kw;
                if (which == ConvProduct::Output)
                  out.data[yi] += a.data[xi] * b.data[wi];
                else if (which == ConvProduct::InputGrad)
                  out.data[xi] += a.data[yi] * b.data[wi];
                else
                  out.data[wi] += a.data[yi] * b.data[xi];
              }
            }
        }
  return context.finish(op->getResult(0), std::move(out));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerConvolutionInterpreterModels(MLIRContext &context) {
  InterpreterFunction<
      Conv2DOp,
      interpretConvolution<Conv2DOp, ConvProduct::Output>>::attach(context);
  InterpreterFunction<
      Conv2DInputGradOp,
      interpretConvolution<Conv2DInputGradOp,
                           ConvProduct::InputGrad>>::attach(context);
  InterpreterFunction<
      Conv2DWeightGradOp,
      interpretConvolution<Conv2DWeightGradOp,
                           ConvProduct::WeightGrad>>::attach(context);
}
