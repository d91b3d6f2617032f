//===- Interpreter.cpp - The reference interpreter of the mnemo dialect ---===//
//
// One function per op, written for clarity: plain loops over row-major
// indices, double arithmetic, and rounding to the result's element type at
// the end (Evaluator::set). Values are freed after their last use, so a
// training step needs about as much memory as the program itself would.
//
//===----------------------------------------------------------------------===//

#include "lang/interpreter/Interpreter.h"
#include "lang/PlanAttributes.h"
#include "lang/interpreter/OpContext.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/bit.h"

#include <cmath>
#include <cstring>
#include <unordered_map>

using namespace mlir;
using namespace mnemo;

ElementType mnemo::elementTypeOf(Type type) {
  if (auto shaped = llvm::dyn_cast<ShapedType>(type))
    type = shaped.getElementType();
  if (type.isF16())
    return ElementType::F16;
  if (type.isBF16())
    return ElementType::BF16;
  if (type.isInteger(64))
    return ElementType::I64;
  if (type.isInteger(32))
    return ElementType::I32;
  if (type.isInteger(16))
    return ElementType::I16;
  if (type.isInteger(8))
    return ElementType::I8;
  if (type.isInteger(1))
    return ElementType::I1;
  return ElementType::F32;
}

namespace {

using Shape = std::vector<int64_t>;

Shape shapeOf(Value v) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  return Shape(type.getShape().begin(), type.getShape().end());
}

/// IEEE half precision bits of a value that f16 represents exactly.
uint16_t encodeF16(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  v = std::fabs(v);
  if (std::isnan(v))
    return 0x7e00;
  if (std::isinf(v))
    return sign | 0x7c00;
  if (v == 0)
    return sign;
  int exp;
  double m = std::frexp(v, &exp); // v = m * 2^exp, 0.5 <= m < 1
  int e = exp - 1 + 15;           // biased exponent of 1.f * 2^(exp-1)
  if (e <= 0)                     // subnormal: v = frac * 2^-24
    return sign | uint16_t(std::ldexp(v, 24));
  return sign | uint16_t(e << 10) | uint16_t((std::ldexp(m, 11) - 1024));
}

double decodeF16(uint16_t bits) {
  double sign = bits & 0x8000 ? -1.0 : 1.0;
  int e = (bits >> 10) & 0x1f, frac = bits & 0x3ff;
  if (e == 0)
    return sign * std::ldexp(double(frac), -24);
  if (e == 31)
    return frac ? NAN : sign * INFINITY;
  return sign * std::ldexp(double(frac + 1024), e - 25);
}

/// Element i of an array of T at `p`, by bytes (the plan's memory is not
/// aligned for T).
template <typename T> void store(uint8_t *p, int64_t i, T x) {
  std::memcpy(p + sizeof(T) * i, &x, sizeof(T));
}
template <typename T> T load(const uint8_t *p, int64_t i) {
  T x;
  std::memcpy(&x, p + sizeof(T) * i, sizeof(T));
  return x;
}

/// Writes `t` into `bytes` at `offset` in its element type's storage format.
void encode(const Tensor &t, std::vector<uint8_t> &bytes, int64_t offset) {
  uint8_t *p = bytes.data() + offset;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double v = t.data[i];
    switch (t.type) {
    case ElementType::F32:
      store(p, i, float(v));
      break;
    case ElementType::BF16: // the top half of the f32 (v is rounded already)
      store(p, i, uint16_t(llvm::bit_cast<uint32_t>(float(v)) >> 16));
      break;
    case ElementType::F16:
      store(p, i, encodeF16(v));
      break;
    case ElementType::I64:
      store(p, i, int64_t(v));
      break;
    case ElementType::I32:
      store(p, i, int32_t(v));
      break;
    case ElementType::I16:
      store(p, i, int16_t(v));
      break;
    case ElementType::I8:
    case ElementType::I1:
      store(p, i, int8_t(v));
      break;
    }
  }
}

void decode(Tensor &t, const std::vector<uint8_t> &bytes, int64_t offset) {
  const uint8_t *p = bytes.data() + offset;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    switch (t.type) {
    case ElementType::F32:
      t.data[i] = load<float>(p, i);
      break;
    case ElementType::BF16:
      t.data[i] = llvm::bit_cast<float>(uint32_t(load<uint16_t>(p, i)) << 16);
      break;
    case ElementType::F16:
      t.data[i] = decodeF16(load<uint16_t>(p, i));
      break;
    case ElementType::I64:
      t.data[i] = double(load<int64_t>(p, i));
      break;
    case ElementType::I32:
      t.data[i] = load<int32_t>(p, i);
      break;
    case ElementType::I16:
      t.data[i] = load<int16_t>(p, i);
      break;
    case ElementType::I8:
      t.data[i] = load<int8_t>(p, i);
      break;
    case ElementType::I1:
      t.data[i] = p[i] != 0;
      break;
    }
  }
}

class Evaluator : public interp::OpContext {
public:
  Evaluator(const InterpreterOptions &options, std::string &error)
      : settings(options), error(error) {}

  LogicalResult run(func::FuncOp func, ArrayRef<Tensor> args,
                    std::vector<Tensor> &results);

private:
  LogicalResult exec(Operation *op);
  const InterpreterOptions &options() const override { return settings; }
  LogicalResult fail(Operation *op, const Twine &message) override {
    std::string loc;
    llvm::raw_string_ostream os(loc);
    op->getLoc().print(os);
    error = (op->getName().getStringRef() + " at " + os.str() + ": " + message)
                .str();
    return failure();
  }

  const Tensor &get(Value v) override {
    // A strided view: its source's current bytes, read permuted.
    auto view = stridedViews.find(v);
    if (view != stridedViews.end()) {
      Tensor permuted =
          permute(get(view->second.first), view->second.second.vec(), like(v));
      Tensor &t = scratch[v.getAsOpaquePointer()];
      t = std::move(permuted);
      return t;
    }
    auto stored = storage.find(v);
    if (stored == storage.end())
      return env.find(v)->second;
    // Planned values live only as bytes: read them back every time.
    Tensor &t = scratch[v.getAsOpaquePointer()];
    t = like(v);
    decode(t, *stored->second.first, stored->second.second);
    return t;
  }
  /// A zero tensor of `v`'s type.
  Tensor like(Value v) override {
    return Tensor(elementTypeOf(v.getType()), shapeOf(v));
  }
  /// Stores a result, rounded to its element type.
  void set(Value v, Tensor t) override {
    t.type = elementTypeOf(v.getType());
    if (!settings.exact || !isFloat(t.type))
      for (double &x : t.data)
        x = roundTo(t.type, x);
    auto [bytes, offset] = plannedStorage(v);
    if (bytes) {
      encode(t, *bytes, offset);
      storage[v] = {bytes, offset};
      return;
    }
    env[v] = std::move(t);
  }

  /// Arena mode: where the plan puts `v` (the arena, the gradient region,
  /// or the storage of the argument it updates in place) and at which
  /// offset; null for values kept as tensors.
  std::pair<std::vector<uint8_t> *, int64_t> plannedStorage(Value v) {
    auto result = llvm::dyn_cast<OpResult>(v);
    if (!settings.arena || !result)
      return {nullptr, 0};
    Operation *op = result.getOwner();
    unsigned i = result.getResultNumber();
    PlacementAttr placed = plan::placement(op);
    if (!placed)
      return {nullptr, 0};
    if (!placed.getGradientOffsets().empty() &&
        placed.getGradientOffsets()[i] >= 0)
      return {&gradients, placed.getGradientOffsets()[i]};
    if (placed.getOffsets()[i] >= 0)
      return {&arena, placed.getOffsets()[i]};
    if (!placed.getAliases().empty() && placed.getAliases()[i] >= 0)
      return {&argStorage[placed.getAliases()[i]], 0};
    return {nullptr, 0};
  }

  template <typename Fn> LogicalResult unary(Operation *op, Fn fn) {
    const Tensor &x = get(op->getOperand(0));
    Tensor out = like(op->getResult(0));
    for (int64_t i = 0; i < x.numElements(); ++i)
      out.data[i] = fn(x.data[i]);
    set(op->getResult(0), std::move(out));
    return success();
  }
  template <typename Fn> LogicalResult binary(Operation *op, Fn fn) {
    const Tensor &x = get(op->getOperand(0)), &y = get(op->getOperand(1));
    Tensor out = like(op->getResult(0));
    for (int64_t i = 0; i < x.numElements(); ++i)
      out.data[i] = fn(x.data[i], y.data[i]);
    set(op->getResult(0), std::move(out));
    return success();
  }

  void readThrough(Value view, Value source,
                   ArrayRef<int64_t> permutation) override {
    stridedViews[view] = {source, permutation};
  }

  const InterpreterOptions &settings;
  std::string &error;
  llvm::DenseMap<Value, Tensor> env;
  // Arena mode: the arena, each argument's storage, where planned values
  // are, and tensors decoded for the op being executed.
  std::vector<uint8_t> arena, gradients;
  std::vector<std::vector<uint8_t>> argStorage;
  llvm::DenseMap<Value, std::pair<std::vector<uint8_t> *, int64_t>> storage;
  // (A node-based map: references to decoded operands stay valid while the
  // next operand is decoded.)
  std::unordered_map<const void *, Tensor> scratch;
  llvm::DenseMap<Value, std::pair<Value, ArrayRef<int64_t>>> stridedViews;
};

LogicalResult Evaluator::run(func::FuncOp func, ArrayRef<Tensor> args,
                             std::vector<Tensor> &results) {
  Block &body = func.getBody().front();
  if (args.size() != body.getNumArguments()) {
    error = "@" + func.getName().str() + " takes " +
            std::to_string(body.getNumArguments()) + " arguments, not " +
            std::to_string(args.size());
    return failure();
  }
  if (settings.arena) {
    StepPlanAttr stepPlan = plan::stepPlan(func);
    if (!stepPlan) {
      error = "@" + func.getName().str() +
              " has no memory plan (run plan-memory first)";
      return failure();
    }
    // Not zero: reading bytes nothing wrote shows in the results.
    arena.assign(stepPlan.getArenaBytes(), 0xAB);
    gradients.assign(stepPlan.getGradientBytes(), 0xAB);
    argStorage.reserve(args.size());
  }
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    if (args[i].shape != shapeOf(arg) ||
        args[i].type != elementTypeOf(arg.getType())) {
      error = "argument " + std::to_string(i) + " of @" + func.getName().str() +
              " should be " +
              Tensor(elementTypeOf(arg.getType()), shapeOf(arg)).typeString() +
              ", not " + args[i].typeString();
      return failure();
    }
    if (settings.arena) {
      // Arguments as bytes, so in-place updates really overwrite them.
      argStorage.emplace_back(args[i].numElements() * 8);
      encode(args[i], argStorage.back(), 0);
      storage[arg] = {&argStorage.back(), 0};
    } else {
      env[arg] = args[i];
    }
  }
  // Free each value after its last use.
  llvm::DenseMap<Operation *, SmallVector<Value>> dying;
  llvm::DenseMap<Value, Operation *> lastUse;
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUse[operand] = &op;
  for (auto &[value, op] : lastUse)
    dying[op].push_back(value);

  for (Operation &op : body) {
    if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        results.push_back(get(v));
      scratch.clear();
      return success();
    }
    if (failed(exec(&op)))
      return failure();
    scratch.clear();
    for (Value v : dying.lookup(&op))
      env.erase(v);
  }
  error = "@" + func.getName().str() + " has no return";
  return failure();
}

LogicalResult Evaluator::exec(Operation *op) {
  // Every op's family has its model (lang/ops/*/*Interpreter.cpp).
  if (auto model = llvm::dyn_cast<InterpretedOpInterface>(op))
    return model.interpret(*this);
  return fail(op, "the interpreter does not know this op");
}

} // namespace

FailureOr<std::vector<Tensor>>
Interpreter::run(func::FuncOp func, ArrayRef<Tensor> args, std::string &error) {
  interp::registerFamilyInterpreterModels(*func->getContext());
  std::vector<Tensor> results;
  Evaluator evaluator(options, error);
  if (failed(evaluator.run(func, args, results)))
    return failure();
  return results;
}
