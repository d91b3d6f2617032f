//===- PoolingInterpreter.cpp - Pooling in the reference interpreter ------===//
//
// The interpreter's models of the pooling ops: every window visited in
// double, padding left out of the maximum and counted as zeros in the
// average (count_include_pad, PyTorch's default). Max pooling's gradient
// goes to the window's first maximum, or its last NaN, as PyTorch's.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"

#include <limits>
#include <type_traits>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

template <typename Op>
struct PoolInterpreterModel
    : InterpretedOpInterface::ExternalModel<PoolInterpreterModel<Op>, Op> {
  static constexpr bool isMax =
      std::is_same_v<Op, MaxPool2DOp> || std::is_same_v<Op, MaxPool2DGradOp>;
  static constexpr bool isGrad = std::is_same_v<Op, MaxPool2DGradOp> ||
                                 std::is_same_v<Op, AvgPool2DGradOp>;

  LogicalResult interpret(Operation *operation, OpContext &context) const {
    auto op = llvm::cast<Op>(operation);
    // x [N*C, H, W] pooled to y [N*C, HO, WO].
    auto [planes, h, w, ho, wo, kh, kw, strideH, strideW, padH, padW] =
        op.getPoolGeometry();
    const Tensor *x = nullptr, *g = nullptr;
    if constexpr (isGrad) {
      g = &context.get(op.getGrad());
      if constexpr (isMax)
        x = &context.get(op.getInput());
    } else {
      x = &context.get(op.getInput());
    }
    Tensor out = context.like(op.getResult());
    double windowSize = double(kh * kw);
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t oh = 0; oh < ho; ++oh)
        for (int64_t ow = 0; ow < wo; ++ow) {
          int64_t yi = (p * ho + oh) * wo + ow;
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t bestAt = -1;
          for (int64_t i = 0; i < kh; ++i) {
            int64_t ih = oh * strideH - padH + i;
            if (ih < 0 || ih >= h)
              continue;
            for (int64_t j = 0; j < kw; ++j) {
              int64_t iw = ow * strideW - padW + j;
              if (iw < 0 || iw >= w)
                continue;
              int64_t xi = (p * h + ih) * w + iw;
              if (isMax) {
                double v = x->data[xi];
                if (v > best || bestAt < 0 || v != v) {
                  best = v;
                  bestAt = xi;
                }
              } else if (isGrad) {
                out.data[xi] += g->data[yi] / windowSize;
              } else {
                sum += x->data[xi];
              }
            }
          }
          if (!isGrad)
            out.data[yi] = isMax ? best : sum / windowSize;
          else if (isMax && bestAt >= 0)
            out.data[bestAt] += g->data[yi];
        }
    return context.finish(op.getResult(), std::move(out));
  }
};

} // namespace

namespace mnemo::interp {
/// Called by registerFamilyInterpreterModels (generated).
void registerPoolingInterpreterModels(MLIRContext &context) {
  MaxPool2DOp::attachInterface<PoolInterpreterModel<MaxPool2DOp>>(context);
  AvgPool2DOp::attachInterface<PoolInterpreterModel<AvgPool2DOp>>(context);
  MaxPool2DGradOp::attachInterface<PoolInterpreterModel<MaxPool2DGradOp>>(
      context);
  AvgPool2DGradOp::attachInterface<PoolInterpreterModel<AvgPool2DGradOp>>(
      context);
}
} // namespace mnemo::interp
