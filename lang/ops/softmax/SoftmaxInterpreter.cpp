//===- SoftmaxInterpreter.cpp - softmax in the reference interpreter ------===//
//
// The interpreter's model of softmax and log_softmax: each row's maximum
// and sum in double, the elements by SoftmaxFormulas.h with the C library's
// exp and log (ExactMath).
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/softmax/SoftmaxFormulas.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

template <typename Op, bool Logarithm>
LogicalResult interpretSoftmax(Op op, OpContext &context) {
  auto [outer, n, inner] = op.getRowGeometry();
  const Tensor &x = context.get(op.getInput());
  Tensor out = context.like(op.getResult());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&, n = n, inner = inner](int64_t j) {
        return (o * n + j) * inner + in;
      };
      double rowMax = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j)
        rowMax = std::max(rowMax, x.data[at(j)]);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += softmax::shiftedExp<double, ExactMath>(x.data[at(j)], rowMax);
      for (int64_t j = 0; j < n; ++j)
        out.data[at(j)] =
            Logarithm
                ? softmax::logSoftmaxValue(x.data[at(j)], rowMax, std::log(sum))
                : softmax::softmaxValue<double, ExactMath>(x.data[at(j)],
                                                           rowMax, 1.0 / sum);
    }
  return context.finish(op.getResult(), std::move(out));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerSoftmaxInterpreterModels(MLIRContext &context) {
  InterpreterFunction<SoftmaxOp, interpretSoftmax<SoftmaxOp, false>>::attach(
      context);
  InterpreterFunction<LogSoftmaxOp,
                      interpretSoftmax<LogSoftmaxOp, true>>::attach(context);
}
