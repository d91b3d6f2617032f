//===- Differential.cpp - Run IR before and after passes, compare ---------===//

#include "lang/interpreter/Differential.h"
#include "lang/MnemoOps.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"
#include "lang/interpreter/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cmath>

#include <optional>

using namespace mlir;
using namespace mnemo;

namespace {
uint64_t splitmix(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
double uniform(uint64_t &state) {
  return double(splitmix(state) >> 11) * 0x1.0p-53;
}
double normal(uint64_t &state) {
  double u1 = std::max(uniform(state), 1e-300), u2 = uniform(state);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

/// The values an integer argument may take: [0, range).
int64_t integerRange(Value arg) {
  int64_t range = 0;
  for (Operation *user : arg.getUsers()) {
    if (auto e = llvm::dyn_cast<EmbeddingOp>(user))
      range = e.getTable().getType().getDimSize(0);
    else if (auto e = llvm::dyn_cast<EmbeddingGradOp>(user))
      range = e.getResult().getType().getDimSize(0);
    else if (auto ce = llvm::dyn_cast<CrossEntropyOp>(user))
      range = ce.getLogits().getType().getShape().back();
    else if (auto ce = llvm::dyn_cast<CrossEntropyGradOp>(user))
      range = ce.getLogits().getType().getShape().back();
    else if (auto acc = llvm::dyn_cast<AccuracyOp>(user))
      range = acc.getLogits().getType().getShape().back();
    else if (auto csr = llvm::dyn_cast<MatmulCsrOp>(user);
             csr && csr.getColumns() == arg)
      range = csr.getLhs().getType().getShape().back();
    if (range > 0)
      return range;
  }
  return 4;
}

/// A CSR weight's row offsets: rising from 0 to a random number of
/// nonzeros within the capacity, as a valid weight file has them.
std::optional<int64_t> csrCapacity(Value arg) {
  for (Operation *user : arg.getUsers())
    if (auto csr = llvm::dyn_cast<MatmulCsrOp>(user);
        csr && csr.getRowOffsets() == arg)
      return csr.getValues().getType().getDimSize(0);
  return std::nullopt;
}
} // namespace

std::vector<Tensor> mnemo::randomArguments(func::FuncOp func, uint64_t seed) {
  std::vector<Tensor> args;
  uint64_t state = seed;
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto type = llvm::cast<RankedTensorType>(arg.getType());
    Tensor t(elementTypeOf(type), std::vector<int64_t>(type.getShape().begin(),
                                                       type.getShape().end()));
    std::optional<ArgumentRole> role =
        model::argumentRole(func, arg.getArgNumber());
    bool isStep =
        role == ArgumentRole::Step || role == ArgumentRole::TotalSteps;
    int64_t range = isFloat(t.type) ? 0 : integerRange(arg);
    if (std::optional<int64_t> capacity = csrCapacity(arg)) {
      int64_t rows = t.numElements() - 1;
      int64_t used = int64_t((0.5 + 0.5 * uniform(state)) * double(*capacity));
      for (int64_t j = 0; j <= rows; ++j)
        t.data[j] = double(j * used / std::max<int64_t>(rows, 1));
      args.push_back(std::move(t));
      continue;
    }
    for (double &x : t.data) {
      if (isStep)
        x = 1 + double(int64_t(uniform(state) * 10));
      else if (t.type == ElementType::I1)
        x = uniform(state) < 0.5 ? 0 : 1;
      else if (isFloat(t.type))
        x = roundTo(t.type, normal(state));
      else
        x = double(int64_t(uniform(state) * double(range)));
    }
    args.push_back(std::move(t));
  }
  return args;
}

std::vector<DifferentialResult>
mnemo::compareModules(ModuleOp before, ModuleOp after, uint64_t seed,
                      double rtol, double atol, bool arenaAfter) {
  std::vector<DifferentialResult> report;
  for (auto reference : before.getOps<func::FuncOp>()) {
    auto transformed = after.lookupSymbol<func::FuncOp>(reference.getName());
    if (!transformed || reference.isExternal())
      continue;
    DifferentialResult result;
    result.function = reference.getName().str();
    std::vector<Tensor> args = randomArguments(reference, seed);
    Interpreter interpreter;
    std::string error;
    auto expected = interpreter.run(reference, args, error);
    if (failed(expected)) {
      result.ok = false;
      result.message = "before: " + error;
      report.push_back(result);
      continue;
    }
    Interpreter afterInterpreter;
    afterInterpreter.options.arena = arenaAfter && plan::stepPlan(transformed);
    auto actual = afterInterpreter.run(transformed, args, error);
    if (failed(actual)) {
      result.ok = false;
      result.message = "after: " + error;
      report.push_back(result);
      continue;
    }
    result.results = expected->size();
    if (expected->size() != actual->size()) {
      result.ok = false;
      result.message = std::to_string(expected->size()) + " results before, " +
                       std::to_string(actual->size()) + " after";
    }
    for (size_t r = 0; result.ok && r < expected->size(); ++r) {
      const Tensor &e = (*expected)[r], &a = (*actual)[r];
      if (e.type != a.type || e.shape != a.shape) {
        result.ok = false;
        result.message = "result " + std::to_string(r) + " is " +
                         e.typeString() + " before and " + a.typeString() +
                         " after";
        break;
      }
      for (int64_t i = 0; i < e.numElements(); ++i) {
        double x = e.data[i], y = a.data[i];
        if (x == y || (std::isnan(x) && std::isnan(y)))
          continue;
        double diff = std::fabs(x - y);
        result.worstRelativeDifference =
            std::max(result.worstRelativeDifference,
                     diff / std::max(std::fabs(x), 1e-30));
        if (!(diff <= atol + rtol * std::fabs(x))) {
          result.ok = false;
          result.message = "result " + std::to_string(r) + ", element " +
                           std::to_string(i) + ": " + std::to_string(x) +
                           " before, " + std::to_string(y) + " after";
          break;
        }
      }
    }
    report.push_back(result);
  }
  return report;
}
