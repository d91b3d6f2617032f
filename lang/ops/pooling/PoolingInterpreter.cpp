//===- PoolingInterpreter.cpp - Pooling in the reference interpreter ------===//
//
// The interpreter's models of the pooling ops: every window visited in
// double by PoolingFormulas.h's formulas, padding left out of the maximum
// and counted as zeros in the average (count_include_pad, PyTorch's
// default). Max pooling's gradient goes to the window's first maximum, or
// its last NaN, as PyTorch's.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/pooling/PoolingFormulas.h"

#include <tuple>
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
    // x [N*C, H, W] pooled to y [N*C, HO, WO], by PoolingFormulas.h's
    // windows in double.
    pooling::PoolShape s =
        std::apply([](auto... sizes) { return pooling::PoolShape{sizes...}; },
                   op.getPoolGeometry());
    const Tensor *x = nullptr, *g = nullptr;
    if constexpr (isGrad) {
      g = &context.get(op.getGrad());
      if constexpr (isMax)
        x = &context.get(op.getInput());
    } else {
      x = &context.get(op.getInput());
    }
    Tensor out = context.like(op.getResult());
    for (int64_t p = 0; p < s.nc; ++p) {
      int64_t plane = p * s.h * s.w;
      auto at = [&](int64_t i) { return x->data[plane + i]; };
      for (int64_t oh = 0; oh < s.ho; ++oh)
        for (int64_t ow = 0; ow < s.wo; ++ow) {
          int64_t yi = (p * s.ho + oh) * s.wo + ow;
          if (!isGrad) {
            out.data[yi] = pooling::poolWindow<isMax, double>(s, oh, ow, at);
          } else if (isMax) {
            out.data[plane + pooling::windowArgmax<double>(s, oh, ow, at)] +=
                g->data[yi];
          } else {
            pooling::Window win = pooling::windowOf(s, oh, ow);
            for (int64_t ih = win.h0; ih < win.h1; ++ih)
              for (int64_t iw = win.w0; iw < win.w1; ++iw)
                out.data[plane + ih * s.w + iw] +=
                    g->data[yi] / double(s.kh * s.kw);
          }
        }
    }
    return context.finish(op.getResult(), std::move(out));
  }
};

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerPoolingInterpreterModels(MLIRContext &context) {
  MaxPool2DOp::attachInterface<PoolInterpreterModel<MaxPool2DOp>>(context);
  AvgPool2DOp::attachInterface<PoolInterpreterModel<AvgPool2DOp>>(context);
  MaxPool2DGradOp::attachInterface<PoolInterpreterModel<MaxPool2DGradOp>>(
      context);
  AvgPool2DGradOp::attachInterface<PoolInterpreterModel<AvgPool2DGradOp>>(
      context);
}
