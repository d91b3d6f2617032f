//===- ReductionsInterpreter.cpp - Reductions in the reference interpreter ===//
//
// The interpreter's models of sum, mean, max and max_grad: in double, every
// element visited in order by its multi-index, with none of the kernels'
// grouping of dimensions. max follows PyTorch: a NaN, once met, is the
// result; max_grad shares each gradient evenly among the tied maxima.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"

#include <limits>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::interp;

namespace {

/// Walks the input in row-major order and gives each element's output
/// index.
class OutputIndex {
public:
  OutputIndex(const Tensor &x, uint32_t reducedMask)
      : counter(x.shape), strides(x.shape.size(), 0) {
    // Each input axis's stride in the output (0 for reduced axes).
    int64_t stride = 1;
    for (int64_t d = x.rank() - 1; d >= 0; --d)
      if (!((reducedMask >> d) & 1)) {
        strides[d] = stride;
        stride *= x.shape[d];
      }
  }
  int64_t operator*() const {
    int64_t o = 0;
    for (size_t d = 0; d < strides.size(); ++d)
      o += counter.index[d] * strides[d];
    return o;
  }
  void next() { counter.next(); }

private:
  IndexCounter counter;
  std::vector<int64_t> strides;
};

enum class Kind { Sum, Mean, Max };

template <typename Op, Kind K>
LogicalResult interpretReduce(Op op, OpContext &context) {
  const Tensor &x = context.get(op.getInput());
  Tensor out = context.like(op.getResult());
  if (K == Kind::Max)
    std::fill(out.data.begin(), out.data.end(),
              -std::numeric_limits<double>::infinity());
  OutputIndex o(x, op.getReducedMask());
  for (int64_t flat = 0; flat < x.numElements(); ++flat, o.next()) {
    double v = x.data[flat];
    double &acc = out.data[*o];
    if (K == Kind::Max)
      acc = acc != acc ? acc : (v > acc || v != v ? v : acc);
    else
      acc += v;
  }
  if (K == Kind::Mean) {
    double count = double(x.numElements()) /
                   double(std::max<int64_t>(1, out.numElements()));
    for (double &v : out.data)
      v /= count;
  }
  return context.finish(op.getResult(), std::move(out));
}

LogicalResult interpretMaxGrad(MaxGradOp op, OpContext &context) {
  const Tensor &g = context.get(op.getGrad()), &x = context.get(op.getInput()),
               &m = context.get(op.getMaximum());
  // Count the ties, then share each gradient among them.
  std::vector<double> ties(m.numElements(), 0);
  OutputIndex o(x, op.getReducedMask());
  for (int64_t flat = 0; flat < x.numElements(); ++flat, o.next())
    ties[*o] += x.data[flat] == m.data[*o];
  Tensor out = context.like(op.getResult());
  OutputIndex again(x, op.getReducedMask());
  for (int64_t flat = 0; flat < x.numElements(); ++flat, again.next())
    if (x.data[flat] == m.data[*again])
      out.data[flat] = g.data[*again] / ties[*again];
  return context.finish(op.getResult(), std::move(out));
}

} // namespace

/// Called by registerFamilyInterpreterModels (generated).
void interp::registerReductionsInterpreterModels(MLIRContext &context) {
  InterpreterFunction<SumOp, interpretReduce<SumOp, Kind::Sum>>::attach(
      context);
  InterpreterFunction<MeanOp, interpretReduce<MeanOp, Kind::Mean>>::attach(
      context);
  InterpreterFunction<MaxOp, interpretReduce<MaxOp, Kind::Max>>::attach(
      context);
  InterpreterFunction<MaxGradOp, interpretMaxGrad>::attach(context);
}
