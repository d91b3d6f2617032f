//===- LogSumExpInterpreter.cpp - logsumexp in the reference interpreter --===//
//
// The interpreter's model of mnemo.logsumexp: in double with the C
// library's exp and log, torch.logsumexp's shift by the row maximum (0 where
// that is infinite).
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

LogicalResult interpretLogSumExp(LogSumExpOp op, OpContext &context) {
  std::array<int64_t, 3> rows = op.getRowGeometry();
  int64_t outer = rows[0], n = rows[1], inner = rows[2];
  const Tensor &x = context.get(op.getInput());
  Tensor out = context.like(op.getResult());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return x.data[(o * n + j) * inner + i]; };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j)
        m = std::isnan(at(j)) || at(j) > m ? at(j) : m;
      double shift = std::isinf(m) ? 0.0 : m, sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(at(j) - shift);
      out.data[o * inner + i] = std::log(sum) + shift;
    }
  return context.finish(op.getResult(), std::move(out));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerLogSumExpInterpreterModels(MLIRContext &context) {
  InterpreterFunction<LogSumExpOp, interpretLogSumExp>::attach(context);
}
