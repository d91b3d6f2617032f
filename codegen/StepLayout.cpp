//===- StepLayout.cpp - Where a planned step's values live ----------------===//
//
// The part of code generation that does not depend on the backend: layouts
// from the memory plan's attributes, views that share their source's
// storage, and the loop of a fused elementwise tree. Each op's expression
// is its family's (elementwiseExpression): calls of the formulas in
// lang/ops/elementwise/ElementwiseFormulas.h, which both
// runtime/cpu/Kernels.h and runtime/cuda/Kernels.cuh include, so one
// expression compiles for either.
//
//===----------------------------------------------------------------------===//

#include "codegen/StepLayout.h"
#include "lang/PlanAttributes.h"

#include "lang/MnemoOps.h"
#include "passes/Fusion.h"
#include "passes/PlanExport.h"
#include "passes/SourcePlace.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

Shape codegen::shapeOf(Value v) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  return Shape(type.getShape().begin(), type.getShape().end());
}

int64_t codegen::product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

CType codegen::ctypeOf(Type type) {
  if (auto shaped = llvm::dyn_cast<ShapedType>(type))
    type = shaped.getElementType();
  if (type.isF32())
    return {"float", "f32", 4, true, false};
  if (type.isBF16())
    return {"bf16_t", "bf16", 2, true, true};
  if (type.isF16())
    return {"f16_t", "f16", 2, true, true};
  if (type.isInteger(64))
    return {"int64_t", "i64", 8, false, false};
  if (type.isInteger(32))
    return {"int32_t", "i32", 4, false, false};
  if (type.isInteger(16))
    return {"int16_t", "i16", 2, false, false};
  if (type.isInteger(8))
    return {"int8_t", "i8", 1, false, false};
  if (type.isInteger(1))
    return {"uint8_t", "u8", 1, false, false};
  return {};
}

std::string codegen::dtypeName(Type type) {
  if (auto shaped = llvm::dyn_cast<ShapedType>(type))
    type = shaped.getElementType();
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return os.str();
}

std::string codegen::floatLiteral(double value) {
  // INFINITY and NAN are macros of <cmath> on the host and builtins in
  // CUDA, so the literal compiles for either.
  if (std::isnan(value))
    return "NAN";
  if (std::isinf(value))
    return value > 0 ? "INFINITY" : "-INFINITY";
  return llvm::formatv("{0:e9}f", float(value)).str();
}

std::string codegen::doubleLiteral(double value) {
  return llvm::formatv("{0:e17}", value).str();
}

std::string codegen::listOf(ArrayRef<int64_t> values) {
  std::string s;
  for (auto [i, v] : llvm::enumerate(values))
    s += (i ? ", " : "") + std::to_string(v);
  return s;
}

std::string codegen::describeLocation(Location loc) {
  SourcePlace place = sourcePlaceOf(loc);
  std::string where =
      place.file.empty()
          ? std::string()
          : (llvm::sys::path::filename(place.file) + ":" +
             llvm::Twine(place.line) + ":" + llvm::Twine(place.column))
                .str();
  return place.layer.empty() ? where : where + " " + place.layer;
}

std::string codegen::jsonString(Attribute attr) {
  if (!attr)
    return "";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << attributeToJson(attr);
  return os.str();
}

std::string codegen::cString(StringRef text) {
  std::string s = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      s += '\\';
    if (c == '\n') {
      s += "\\n";
      continue;
    }
    s += c;
  }
  return s + "\"";
}

bool Layout::isContiguous() const {
  Shape expected = rowMajorStrides(shape);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && strides[i] != expected[i])
      return false;
  return true;
}

CoalescedLoop codegen::coalesce(const Loop &loop, const Shape &resultStrides) {
  std::vector<Shape> strides;
  for (const Loop::Leaf &leaf : loop.leaves)
    strides.push_back(leaf.strides);
  strides.push_back(resultStrides);
  CoalescedLoop c;
  c.strides.resize(strides.size());
  for (size_t d = 0; d < loop.shape.size(); ++d) {
    if (loop.shape[d] == 1)
      continue;
    bool merge = !c.dims.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k)
      merge = c.strides[k].back() == strides[k][d] * loop.shape[d];
    if (merge) {
      c.dims.back() *= loop.shape[d];
      for (size_t k = 0; k < strides.size(); ++k)
        c.strides[k].back() = strides[k][d];
    } else {
      c.dims.push_back(loop.shape[d]);
      for (size_t k = 0; k < strides.size(); ++k)
        c.strides[k].push_back(strides[k][d]);
    }
  }
  return c;
}

std::string codegen::substitute(std::string s,
                                const std::vector<std::string> &reads,
                                const std::string &flat) {
  for (size_t k = reads.size(); k-- > 0;) {
    std::string key = "{L" + std::to_string(k) + "}";
    for (size_t at; (at = s.find(key)) != std::string::npos;)
      s.replace(at, key.size(), reads[k]);
  }
  for (size_t at; (at = s.find("{FLAT}")) != std::string::npos;)
    s.replace(at, 6, flat);
  return s;
}

FailureOr<GemmOperand> codegen::gemmOperand(const Layout &l, bool opTranspose) {
  size_t r = l.shape.size();
  int64_t rows = l.shape[r - 2], cols = l.shape[r - 1];
  int64_t sr = l.strides[r - 2], sc = l.strides[r - 1];
  GemmOperand g;
  g.pointer = l.pointer;
  if (sc == 1 || cols == 1) {
    g.ld = std::max(cols, rows == 1 ? cols : sr);
  } else if (sr == 1 || rows == 1) {
    g.transpose = true;
    g.ld = std::max(rows, cols == 1 ? rows : sc);
  } else {
    return failure();
  }
  g.transpose ^= opTranspose;
  g.batchStrides.assign(l.strides.begin(), l.strides.end() - 2);
  return g;
}

//===----------------------------------------------------------------------===//
// Layouts
//===----------------------------------------------------------------------===//

LogicalResult StepLayouts::assignArguments() {
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    Layout l;
    l.type = ctypeOf(arg.getType());
    if (l.type.name.empty())
      return func.emitError()
             << "the " << backend << " backend: element type "
             << dtypeName(arg.getType()) << " is not supported";
    SlotAttr slot = plan::slot(func, arg.getArgNumber());
    if (!slot)
      return func.emitError() << "has no memory plan (run plan-memory first)";
    l.region = slot.getRegion();
    l.offset = slot.getOffset();
    l.pointer = place(l.type, *l.region, l.offset);
    l.shape = shapeOf(arg);
    l.strides = rowMajorStrides(l.shape);
    layouts[arg] = l;
  }
  return success();
}

bool StepLayouts::isView(Operation *op) const {
  if (isFused(op) || llvm::isa<ConstantOp>(op))
    return true;
  if (auto reshape = llvm::dyn_cast<ReshapeOp>(op)) {
    Layout source = layouts.lookup(reshape.getInput());
    if (source.isSplat() || source.isContiguous())
      return true;
  }
  PlacementAttr placed = plan::placement(op);
  return llvm::isa<TransposeOp>(op) && placed && placed.getStridedView();
}

LogicalResult StepLayouts::assign(Operation *op) {
  if (isFused(op))
    return success();
  PlacementAttr placed = plan::placement(op);
  if (!placed)
    return error(op, "has no placement in the memory plan");
  ArrayRef<int64_t> offsets = placed.getOffsets(),
                    gradients = placed.getGradientOffsets(),
                    aliases = placed.getAliases();
  if (auto constant = llvm::dyn_cast<ConstantOp>(op)) {
    Value result = constant.getResult();
    Layout l;
    l.type = ctypeOf(result.getType());
    l.shape = shapeOf(result);
    l.strides = Shape(l.shape.size(), 0);
    auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense)
      return error(op, "only dense constants are supported");
    auto valueAt = [&](int64_t i) -> double {
      if (llvm::isa<FloatType>(dense.getElementType()))
        return (*(dense.getValues<APFloat>().begin() + i)).convertToDouble();
      return double((*(dense.getValues<APInt>().begin() + i)).getSExtValue());
    };
    // Half-precision constants are spelled as f32 values: every elementwise
    // expression computes in f32.
    std::string valueType = l.type.isHalf ? "float" : l.type.name;
    if (dense.isSplat()) {
      double v = valueAt(0);
      l.splat = l.type.isFloat
                    ? floatLiteral(v)
                    : "(" + l.type.name + ")" + std::to_string(int64_t(v));
    } else {
      if (l.type.isHalf)
        return error(op, "a non-splat half-precision constant is not "
                         "supported");
      std::string name = "constant" + std::to_string(constantCount++);
      constants << qualifier << " " << valueType << " " << name << "[] = {";
      for (int64_t i = 0; i < dense.getNumElements(); ++i)
        constants << (i ? ", " : "")
                  << (l.type.isFloat ? floatLiteral(valueAt(i))
                                     : std::to_string(int64_t(valueAt(i))));
      constants << "};\n";
      l.pointer = "const_cast<" + l.type.name + " *>(" + name + ")";
      l.strides = rowMajorStrides(l.shape);
    }
    layouts[result] = l;
    return success();
  }
  // Views: a reshape of contiguous data, and a transpose planned as a
  // strided view.
  if (auto reshape = llvm::dyn_cast<ReshapeOp>(op)) {
    Layout source = layouts.lookup(reshape.getInput());
    if (source.isSplat() || source.isContiguous()) {
      Layout l = source;
      l.shape = shapeOf(reshape.getResult());
      l.strides = source.isSplat() ? Shape(l.shape.size(), 0)
                                   : rowMajorStrides(l.shape);
      layouts[reshape.getResult()] = l;
      return success();
    }
  }
  if (auto transpose = llvm::dyn_cast<TransposeOp>(op);
      transpose && placed.getStridedView()) {
    Layout source = layouts.lookup(transpose.getInput());
    Layout l = source;
    l.shape.clear();
    l.strides.clear();
    for (int64_t p : transpose.getPermutation()) {
      l.shape.push_back(source.shape[p]);
      l.strides.push_back(source.strides[p]);
    }
    layouts[transpose.getResult()] = l;
    return success();
  }
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    Layout l;
    l.type = ctypeOf(result.getType());
    if (l.type.name.empty())
      return error(op, "element type " + dtypeName(result.getType()) +
                           " is not supported");
    l.shape = shapeOf(result);
    l.strides = rowMajorStrides(l.shape);
    if (!gradients.empty() && gradients[i] >= 0) {
      l.region = MemoryRegion::Gradients;
      l.offset = gradients[i];
    } else if (offsets[i] >= 0) {
      l.region = MemoryRegion::Arena;
      l.offset = offsets[i];
    } else if (!aliases.empty() && aliases[i] >= 0) {
      Layout arg = layouts.lookup(func.getArgument(aliases[i]));
      l.region = arg.region;
      l.offset = arg.offset;
    } else {
      return error(op, "internal error: result " + std::to_string(i) +
                           " has no place in the memory plan");
    }
    l.pointer = place(l.type, *l.region, l.offset);
    layouts[result] = l;
  }
  return success();
}

std::string StepLayouts::shapeArray(const Shape &shape) {
  std::string name = "shape" + std::to_string(constantCount++);
  constants << qualifier << " int64_t " << name << "[] = {" << listOf(shape)
            << "};\n";
  return name;
}

FailureOr<std::string> StepLayouts::pointer(Value v, Operation *user) {
  auto it = layouts.find(v);
  if (it == layouts.end()) {
    error(user, "internal error: an operand has no storage");
    return failure();
  }
  const Layout &l = it->second;
  if (l.isSplat()) {
    if (l.type.isHalf) {
      error(user, "a kernel operand is a half-precision constant");
      return failure();
    }
    std::string name = "splat" + std::to_string(constantCount++);
    int64_t n = std::max<int64_t>(1, product(l.shape));
    constants << qualifier << " " << l.type.name << " " << name << "[" << n
              << "] = {";
    // Spelled out: a splat a kernel reads is small (a loss seed, a scale).
    for (int64_t i = 0; i < n; ++i)
      constants << (i ? ", " : "") << l.splat;
    constants << "};\n";
    return "const_cast<" + l.type.name + " *>(" + name + ")";
  }
  if (!l.isContiguous()) {
    error(user, "internal error: a kernel operand is a strided view");
    return failure();
  }
  return l.pointer;
}

FailureOr<std::string> StepLayouts::pointerAt(Value v, Operation *user,
                                              int64_t elements) {
  FailureOr<std::string> at = pointer(v, user);
  if (failed(at) || elements == 0)
    return at;
  const Layout &l = layouts.find(v)->second;
  if (l.region)
    return place(l.type, *l.region, l.offset + elements * l.type.bytes);
  return *at + " + " + std::to_string(elements);
}

FailureOr<GemmProblem> StepLayouts::gemmProblem(Operation *op, bool ta,
                                                bool tb) {
  GemmProblem p;
  p.a = layouts.lookup(op->getOperand(0));
  p.b = layouts.lookup(op->getOperand(1));
  p.c = layouts.lookup(op->getResult(0));
  if (p.a.isSplat() || p.b.isSplat()) {
    error(op, "a matrix product of a constant is not supported");
    return failure();
  }
  FailureOr<GemmOperand> ga = gemmOperand(p.a, ta), gb = gemmOperand(p.b, tb);
  if (failed(ga) || failed(gb)) {
    error(op, "internal error: a GEMM operand has no unit stride");
    return failure();
  }
  p.ga = *ga;
  p.gb = *gb;
  size_t r = p.c.shape.size();
  p.m = p.c.shape[r - 2];
  p.n = p.c.shape[r - 1];
  p.k = ta ? p.a.shape[p.a.shape.size() - 2] : p.a.shape.back();
  p.batch.assign(p.c.shape.begin(), p.c.shape.end() - 2);
  return p;
}

//===----------------------------------------------------------------------===//
// Fused loops
//===----------------------------------------------------------------------===//

std::string StepLayouts::leafRead(Loop &loop, const Layout &layout,
                                  Shape strides) {
  if (layout.isSplat())
    return layout.splat;
  loop.leaves.push_back({layout.pointer, std::move(strides), layout.region,
                         layout.offset, layout.type});
  std::string read = "{L" + std::to_string(loop.leaves.size() - 1) + "}";
  // 16-bit floats are widened on load: the loop computes in f32.
  return layout.type.isHalf ? "float(" + read + ")" : read;
}

/// The loop-local name of `v`'s element at the loop index.
FailureOr<std::string> StepLayouts::expression(Value v, Loop &loop) {
  auto known = loop.names.find(v);
  if (known != loop.names.end())
    return known->second;
  Operation *def = v.getDefiningOp();
  std::string value;
  if (def && isFused(def)) {
    if (auto broadcast = llvm::dyn_cast<BroadcastOp>(def)) {
      // Read the input with stride 0 along the broadcast dimensions.
      Layout in = layouts.lookup(broadcast.getInput());
      int64_t lead = int64_t(loop.shape.size() - in.shape.size());
      Shape strides(loop.shape.size(), 0);
      for (size_t d = 0; d < in.shape.size(); ++d)
        if (in.shape[d] != 1)
          strides[lead + d] = in.strides[d];
      value = leafRead(loop, in, strides);
    } else {
      FailureOr<std::string> e = opExpression(def, loop);
      if (failed(e))
        return failure();
      value = *e;
      // A 16-bit intermediate is rounded to its type, as if stored: the
      // loop computes what the unfused ops (and the interpreter) compute.
      CType type = ctypeOf(v.getType());
      if (type.isHalf)
        value = "float(" + type.name + "(" + value + "))";
    }
  } else {
    auto it = layouts.find(v);
    if (it == layouts.end()) {
      error(loop.statements.empty() ? func : v.getParentBlock()->getParentOp(),
            "internal error: a loop operand has no storage");
      return failure();
    }
    value = leafRead(loop, it->second, it->second.strides);
  }
  CType type = ctypeOf(v.getType());
  std::string name = "t" + std::to_string(loop.temporaries++);
  loop.statements.push_back("const " + (type.isHalf ? "float" : type.name) +
                            " " + name + " = " + value + ";");
  loop.names[v] = name;
  return name;
}

FailureOr<std::string> StepLayouts::opExpression(Operation *op, Loop &loop) {
  SmallVector<std::string> x;
  for (Value operand : op->getOperands()) {
    FailureOr<std::string> e = expression(operand, loop);
    if (failed(e))
      return failure();
    x.push_back(*e);
  }
  return elementwiseExpression(op, x, loop, *this);
}

FailureOr<Loop> StepLayouts::buildLoop(Operation *root) {
  Value result = root->getResult(0);
  Loop loop;
  if (llvm::isa<BroadcastOp, TransposeOp, ReshapeOp>(root)) {
    // Copies: the input read through strides over the result's shape.
    Value input = root->getOperand(0);
    Layout in = layouts.lookup(input);
    loop.shape = shapeOf(result);
    Shape strides(loop.shape.size(), 0);
    if (auto transpose = llvm::dyn_cast<TransposeOp>(root)) {
      for (auto [i, p] : llvm::enumerate(transpose.getPermutation()))
        strides[i] = in.strides[p];
    } else if (llvm::isa<BroadcastOp>(root)) {
      int64_t lead = int64_t(loop.shape.size() - in.shape.size());
      for (size_t d = 0; d < in.shape.size(); ++d)
        if (in.shape[d] != 1)
          strides[lead + d] = in.strides[d];
    } else {
      // A reshape of a strided view: copy in the view's row-major order.
      loop.shape = in.shape;
      strides = in.strides;
    }
    loop.value = leafRead(loop, in, strides);
  } else {
    loop.shape = shapeOf(result);
    FailureOr<std::string> e = opExpression(root, loop);
    if (failed(e))
      return failure();
    loop.value = *e;
  }
  CType type = ctypeOf(result.getType());
  if (type.isHalf)
    loop.value = type.name + "(" + loop.value + ")";
  return loop;
}
