//===- Interpreter.cpp - The reference interpreter of the mnemo dialect ---===//
//
// One function per op, written for clarity: plain loops over row-major
// indices, double arithmetic, and rounding to the result's element type at
// the end (Evaluator::set). Values are freed after their last use, so a
// training step needs about as much memory as the program itself would.
//
//===----------------------------------------------------------------------===//

#include "lang/interpreter/Interpreter.h"
#include "lang/MnemoOps.h"
#include "lang/PlanAttributes.h"
#include "lang/ShapeRules.h"
#include "lang/interpreter/OpContext.h"
#include "lang/ops/quantization/QuantizationReference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstring>
#include <limits>
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

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
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

/// Writes `t` into `bytes` at `offset` in its element type's storage format.
void encode(const Tensor &t, std::vector<uint8_t> &bytes, int64_t offset) {
  uint8_t *p = bytes.data() + offset;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double v = t.data[i];
    switch (t.type) {
    case ElementType::F32: {
      float f = float(v);
      std::memcpy(p + 4 * i, &f, 4);
      break;
    }
    case ElementType::BF16: {
      float f = float(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      uint16_t top = uint16_t(bits >> 16);
      std::memcpy(p + 2 * i, &top, 2);
      break;
    }
    case ElementType::F16: {
      uint16_t h = encodeF16(v);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case ElementType::I64: {
      int64_t x = int64_t(v);
      std::memcpy(p + 8 * i, &x, 8);
      break;
    }
    case ElementType::I32: {
      int32_t x = int32_t(v);
      std::memcpy(p + 4 * i, &x, 4);
      break;
    }
    case ElementType::I16: {
      int16_t x = int16_t(v);
      std::memcpy(p + 2 * i, &x, 2);
      break;
    }
    case ElementType::I8:
    case ElementType::I1:
      p[i] = uint8_t(int8_t(v));
      break;
    }
  }
}

void decode(Tensor &t, const std::vector<uint8_t> &bytes, int64_t offset) {
  const uint8_t *p = bytes.data() + offset;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    switch (t.type) {
    case ElementType::F32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      t.data[i] = f;
      break;
    }
    case ElementType::BF16: {
      uint16_t top;
      std::memcpy(&top, p + 2 * i, 2);
      uint32_t bits = uint32_t(top) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      t.data[i] = f;
      break;
    }
    case ElementType::F16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      t.data[i] = decodeF16(h);
      break;
    }
    case ElementType::I64: {
      int64_t x;
      std::memcpy(&x, p + 8 * i, 8);
      t.data[i] = double(x);
      break;
    }
    case ElementType::I32: {
      int32_t x;
      std::memcpy(&x, p + 4 * i, 4);
      t.data[i] = x;
      break;
    }
    case ElementType::I16: {
      int16_t x;
      std::memcpy(&x, p + 2 * i, 2);
      t.data[i] = x;
      break;
    }
    case ElementType::I8:
      t.data[i] = int8_t(p[i]);
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
          permute(get(view->second.first), view->second.second, like(v));
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

  // Op families.
  LogicalResult execMatmul(Operation *op, bool transposeLhs, bool transposeRhs,
                           bool batched);
  LogicalResult execTranspose(TransposeOp op);
  static Tensor permute(const Tensor &x, ArrayRef<int64_t> perm, Tensor out);
  LogicalResult execBroadcast(BroadcastOp op);
  LogicalResult execAdam(AdamUpdateOp op);
  LogicalResult execAdam8bit(Adam8bitUpdateOp op);
  LogicalResult execSgd(SgdUpdateOp op);
  LogicalResult execLrSchedule(LrScheduleOp op);

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
  // An op whose family has a folder: its model (lang/ops/*/*Interpreter.cpp).
  if (auto model = llvm::dyn_cast<InterpretedOpInterface>(op))
    return model.interpret(*this);
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ConstantOp c) {
        auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
        if (!dense)
          return fail(op, "only dense constants are supported");
        Tensor out = like(c.getResult());
        int64_t i = 0;
        if (llvm::isa<FloatType>(dense.getElementType())) {
          for (APFloat v : dense.getValues<APFloat>())
            out.data[i++] = v.convertToDouble();
        } else {
          for (APInt v : dense.getValues<APInt>())
            out.data[i++] = double(v.getSExtValue());
        }
        set(c.getResult(), std::move(out));
        return success();
      })
      // Contractions.
      .Case([&](MatmulOp m) {
        return execMatmul(op, m.getTransposeLhs(), m.getTransposeRhs(), false);
      })
      .Case([&](BatchMatmulOp m) {
        return execMatmul(op, m.getTransposeLhs(), m.getTransposeRhs(), true);
      })
      // Losses and metrics.
      .Case([&](ReshapeOp r) {
        Tensor out = get(r.getInput());
        out.shape = shapeOf(r.getResult());
        set(r.getResult(), std::move(out));
        return success();
      })
      .Case([&](TransposeOp t) { return execTranspose(t); })
      .Case([&](BroadcastOp b) { return execBroadcast(b); })
      // The optimizer.
      .Case([&](LrScheduleOp s) { return execLrSchedule(s); })
      .Case([&](GlobalNormOp n) {
        double sum = 0;
        for (Value v : n.getInputs())
          for (double x : get(v).data)
            sum += x * x;
        Tensor out = like(n.getResult());
        out.data[0] = std::sqrt(sum);
        set(n.getResult(), std::move(out));
        return success();
      })
      .Case([&](ClipCoefficientOp c) {
        double norm = get(c.getNorm()).data[0];
        Tensor out = like(c.getResult());
        // As torch.nn.utils.clip_grad_norm_: the coefficient in the
        // gradients' precision (f32; double in exact mode), clamped.
        double maxNorm = c.getMaxNorm().convertToDouble();
        double coef = settings.exact
                          ? maxNorm / (norm + 1e-6)
                          : double(float(maxNorm) / float(norm + 1e-6));
        out.data[0] = std::min(coef, 1.0);
        set(c.getResult(), std::move(out));
        return success();
      })
      .Case([&](LossScaleUpdateOp u) {
        // torch.cuda.amp.GradScaler.update, with the count as a float.
        double norm = get(u.getNorm()).data[0];
        double scale = get(u.getScale()).data[0];
        double count = get(u.getCount()).data[0];
        bool finite = std::isfinite(norm);
        double newCount = finite ? count + 1 : 0;
        double newScale =
            finite ? scale : scale * u.getBackoffFactor().convertToDouble();
        if (finite && newCount >= double(u.getGrowthInterval())) {
          newScale = scale * u.getGrowthFactor().convertToDouble();
          newCount = 0;
        }
        for (auto [v, x] : {std::pair<Value, double>{u.getNewScale(), newScale},
                            {u.getNewCount(), newCount},
                            {u.getSkip(), finite ? 0.0 : 1.0}}) {
          Tensor out = like(v);
          out.data[0] = x;
          set(v, std::move(out));
        }
        return success();
      })
      .Case([&](SgdUpdateOp s) { return execSgd(s); })
      .Case([&](AdamUpdateOp a) { return execAdam(a); })
      .Case([&](Adam8bitUpdateOp a) { return execAdam8bit(a); })
      .Default([&](Operation *) {
        return fail(op, "the interpreter does not know this op");
      });
}

LogicalResult Evaluator::execMatmul(Operation *op, bool ta, bool tb,
                                    bool batched) {
  const Tensor &a = get(op->getOperand(0)), &b = get(op->getOperand(1));
  Tensor out = like(op->getResult(0));
  int64_t ar = a.rank(), br = b.rank();
  // The matrices' dimensions as read (after the transpose flags).
  int64_t m = ta ? a.shape[ar - 1] : a.shape[ar - 2];
  int64_t k = ta ? a.shape[ar - 2] : a.shape[ar - 1];
  int64_t n = tb ? b.shape[br - 2] : b.shape[br - 1];
  int64_t aMat = a.shape[ar - 2] * a.shape[ar - 1];
  int64_t bMat = b.shape[br - 2] * b.shape[br - 1];
  int64_t batches = product(ArrayRef<int64_t>(a.shape).drop_back(2));
  for (int64_t batch = 0; batch < batches; ++batch) {
    const double *A = &a.data[batch * aMat];
    const double *B = batched ? &b.data[batch * bMat] : b.data.data();
    double *C = &out.data[batch * m * n];
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        double av = ta ? A[p * m + i] : A[i * k + p];
        if (av == 0)
          continue;
        for (int64_t j = 0; j < n; ++j)
          C[i * n + j] += av * (tb ? B[j * k + p] : B[p * n + j]);
      }
  }
  set(op->getResult(0), std::move(out));
  return success();
}

Tensor Evaluator::permute(const Tensor &x, ArrayRef<int64_t> perm, Tensor out) {
  std::vector<int64_t> inStrides = x.strides();
  IndexCounter it(out.shape);
  for (int64_t flat = 0; flat < out.numElements(); ++flat, it.next()) {
    int64_t src = 0;
    for (size_t i = 0; i < perm.size(); ++i)
      src += it.index[i] * inStrides[perm[i]];
    out.data[flat] = x.data[src];
  }
  return out;
}

LogicalResult Evaluator::execTranspose(TransposeOp op) {
  PlacementAttr placed = plan::placement(op);
  if (settings.arena && placed && placed.getStridedView()) {
    // Planned as a view: nothing is written; every use reads the source.
    stridedViews[op.getResult()] = {op.getInput(), op.getPermutation()};
    return success();
  }
  set(op.getResult(),
      permute(get(op.getInput()), op.getPermutation(), like(op.getResult())));
  return success();
}

LogicalResult Evaluator::execBroadcast(BroadcastOp op) {
  const Tensor &x = get(op.getInput());
  Tensor out = like(op.getResult());
  std::vector<int64_t> inStrides = x.strides();
  int64_t lead = out.rank() - x.rank();
  IndexCounter it(out.shape);
  for (int64_t flat = 0; flat < out.numElements(); ++flat, it.next()) {
    int64_t src = 0;
    for (int64_t i = 0; i < x.rank(); ++i)
      if (x.shape[i] != 1)
        src += it.index[lead + i] * inStrides[i];
    out.data[flat] = x.data[src];
  }
  set(op.getResult(), std::move(out));
  return success();
}

LogicalResult Evaluator::execLrSchedule(LrScheduleOp op) {
  double step = get(op.getStep()).data[0];
  double total = op.getSteps() > 0 ? double(op.getSteps())
                                   : get(op.getTotalSteps()).data[0];
  double base = op.getBaseLr().convertToDouble(),
         minLr = op.getMinLr().convertToDouble();
  double warmup = double(op.getWarmup());
  double lr = base;
  if (warmup > 0 && step <= warmup) {
    lr = base * step / warmup;
  } else if (op.getKind() == "cosine") {
    double progress = (step - warmup) / std::max(1.0, total - warmup);
    progress = std::min(1.0, std::max(0.0, progress));
    lr = minLr + (base - minLr) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  Tensor out = like(op.getResult());
  out.data[0] = lr;
  set(op.getResult(), std::move(out));
  return success();
}

LogicalResult Evaluator::execSgd(SgdUpdateOp op) {
  const Tensor &p = get(op.getParam()), &g = get(op.getGrad()),
               &buf = get(op.getMomentumBuffer());
  if (op.getSkip() && get(op.getSkip()).data[0] != 0) {
    // Copies first: set() may move the tensors p and buf refer to.
    Tensor sameP = p, sameBuf = buf;
    set(op.getNewParam(), std::move(sameP));
    set(op.getNewMomentumBuffer(), std::move(sameBuf));
    return success();
  }
  double lr = get(op.getLr()).data[0];
  int64_t step = int64_t(get(op.getStep()).data[0]);
  double momentum = op.getMomentum().convertToDouble();
  double dampening = op.getDampening().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  Tensor newP = like(op.getNewParam()), newBuf = buf;
  ElementType t = p.type;
  auto r = [&](double x) { return settings.exact ? x : roundTo(t, x); };
  for (int64_t i = 0; i < p.numElements(); ++i) {
    double d = wd != 0 ? r(g.data[i] + wd * p.data[i]) : g.data[i];
    if (momentum != 0) {
      double b =
          step <= 1 ? d : r(momentum * buf.data[i] + (1 - dampening) * d);
      newBuf.data[i] = b;
      d = op.getNesterov() ? r(d + momentum * b) : b;
    }
    newP.data[i] = p.data[i] - lr * d;
  }
  set(op.getNewParam(), std::move(newP));
  set(op.getNewMomentumBuffer(), std::move(newBuf));
  return success();
}

LogicalResult Evaluator::execAdam(AdamUpdateOp op) {
  const Tensor &p = get(op.getParam()), &g = get(op.getGrad());
  const Tensor &m = get(op.getExpAvg()), &v = get(op.getExpAvgSq());
  if (op.getSkip() && get(op.getSkip()).data[0] != 0) {
    // Copies first: set() may move the tensors p, m and v refer to.
    Tensor sameP = p, sameM = m, sameV = v;
    set(op.getNewParam(), std::move(sameP));
    set(op.getNewExpAvg(), std::move(sameM));
    set(op.getNewExpAvgSq(), std::move(sameV));
    return success();
  }
  // PyTorch's single-tensor Adam, step by step, each intermediate rounded to
  // the parameter's type as its f32 arithmetic would.
  double lr = get(op.getLr()).data[0];
  double step = get(op.getStep()).data[0];
  double b1 = op.getBeta1().convertToDouble(),
         b2 = op.getBeta2().convertToDouble();
  double eps = op.getEps().convertToDouble(),
         wd = op.getWeightDecay().convertToDouble();
  ElementType t = p.type;
  auto r = [&](double x) { return settings.exact ? x : roundTo(t, x); };
  double biasCorrection1 = 1 - std::pow(b1, step);
  double biasCorrection2 = 1 - std::pow(b2, step);
  double stepSize = lr / biasCorrection1;
  double biasCorrection2Sqrt = std::sqrt(biasCorrection2);
  Tensor newP = like(op.getNewParam()), newM = like(op.getNewExpAvg()),
         newV = like(op.getNewExpAvgSq());
  for (int64_t i = 0; i < p.numElements(); ++i) {
    double param = p.data[i], grad = g.data[i];
    if (op.getDecoupled())
      param = r(param * (1 - lr * wd));
    else if (wd != 0)
      grad = r(grad + wd * param);
    double mi = r(m.data[i] + (grad - m.data[i]) * (1 - b1));
    double vi = r(r(v.data[i] * b2) + (1 - b2) * grad * grad);
    double denom = r(r(std::sqrt(vi) / biasCorrection2Sqrt) + eps);
    newP.data[i] = param - stepSize * r(mi / denom);
    newM.data[i] = mi;
    newV.data[i] = vi;
  }
  set(op.getNewParam(), std::move(newP));
  set(op.getNewExpAvg(), std::move(newM));
  set(op.getNewExpAvgSq(), std::move(newV));
  return success();
}

LogicalResult Evaluator::execAdam8bit(Adam8bitUpdateOp op) {
  const Tensor &p = get(op.getParam()), &g = get(op.getGrad());
  const Tensor &mCodes = get(op.getExpAvgCodes()),
               &mMax = get(op.getExpAvgAbsmax()),
               &vCodes = get(op.getExpAvgSqCodes()),
               &vMax = get(op.getExpAvgSqAbsmax());
  if (op.getSkip() && get(op.getSkip()).data[0] != 0) {
    Tensor same[] = {p, mCodes, mMax, vCodes, vMax};
    for (unsigned r = 0; r < 5; ++r)
      set(op->getResult(r), std::move(same[r]));
    return success();
  }
  // bitsandbytes' arithmetic, in f32: dequantize both moments, take
  // torch.optim.AdamW's step (its scalars computed in double and rounded
  // once, as Python floats meet f32 tensors), requantize each block by its
  // new maximum.
  int64_t n = p.numElements(), block = op.getBlockSize();
  double lr = float(get(op.getLr()).data[0]);
  double step = get(op.getStep()).data[0];
  double b1 = op.getBeta1().convertToDouble(),
         b2 = op.getBeta2().convertToDouble();
  double eps = op.getEps().convertToDouble(),
         wd = op.getWeightDecay().convertToDouble();
  float stepSize = float(lr / (1.0 - std::pow(b1, step)));
  float biasCorrection2Sqrt = float(std::sqrt(1.0 - std::pow(b2, step)));
  float decay = float(1.0 - lr * wd), beta2 = float(b2);
  float oneMinusBeta1 = float(1.0 - b1), oneMinusBeta2 = float(1.0 - b2);
  float epsilon = float(eps);
  Tensor outP = like(op.getNewParam()), outMc = like(op.getNewExpAvgCodes()),
         outMa = like(op.getNewExpAvgAbsmax()),
         outVc = like(op.getNewExpAvgSqCodes()),
         outVa = like(op.getNewExpAvgSqAbsmax());
  auto codeAt = [](const Tensor &codes, int64_t i) {
    return uint8_t(int8_t(codes.data[i]));
  };
  std::vector<float> newM, newV;
  for (int64_t begin = 0, b = 0; begin < n; begin += block, ++b) {
    int64_t end = std::min(n, begin + block);
    float mMaxIn = float(mMax.data[b]), vMaxIn = float(vMax.data[b]);
    newM.clear();
    newV.clear();
    for (int64_t i = begin; i < end; ++i) {
      float grad = float(g.data[i]);
      float m = reference::codeValue(codeAt(mCodes, i), true) * mMaxIn;
      float v = reference::codeValue(codeAt(vCodes, i), false) * vMaxIn;
      float param = float(p.data[i]) * decay;
      m = m + (grad - m) * oneMinusBeta1;
      v = v * beta2 + oneMinusBeta2 * grad * grad;
      float denom = std::sqrt(v) / biasCorrection2Sqrt + epsilon;
      param = param - stepSize * (m / denom);
      outP.data[i] = settings.exact ? param : roundTo(p.type, param);
      newM.push_back(m);
      newV.push_back(v);
    }
    auto requantize = [&](const std::vector<float> &values, bool isSigned,
                          Tensor &codes, Tensor &absMax) {
      float largest = 0.0f;
      for (float x : values)
        largest = std::max(largest, std::fabs(x));
      float inverse = largest > 0.0f ? 1.0f / largest : 0.0f;
      for (size_t j = 0; j < values.size(); ++j)
        codes.data[begin + j] =
            int8_t(reference::nearestCode(values[j] * inverse, isSigned));
      absMax.data[b] = largest;
    };
    requantize(newM, true, outMc, outMa);
    requantize(newV, false, outVc, outVa);
  }
  set(op.getNewParam(), std::move(outP));
  set(op.getNewExpAvgCodes(), std::move(outMc));
  set(op.getNewExpAvgAbsmax(), std::move(outMa));
  set(op.getNewExpAvgSqCodes(), std::move(outVc));
  set(op.getNewExpAvgSqAbsmax(), std::move(outVa));
  return success();
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
