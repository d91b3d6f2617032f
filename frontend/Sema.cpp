//===- Sema.cpp - Elaboration: layers, hyper-parameters, shapes -----------===//
//
// Sema runs the program at compile time. A layer body runs once per instance
// (declaring parameters and sub-layers, like nn.Module.__init__); a forward
// runs once per call site, emitting graph ops with inferred types. Errors
// leave an Error value behind that later operations pass through silently,
// so one run reports every independent mistake without cascades.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaInternal.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/SourceMgr.h"

#include <cmath>
#include <limits>

using namespace mnemo;
using namespace mnemo::sema;
using llvm::cast;
using llvm::dyn_cast;
using llvm::isa;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::Twine;

std::optional<Graph> mnemo::elaborate(const Program &program,
                                      const ElaborateOptions &options,
                                      Diagnostics &diags) {
  Sema sema(program, diags);
  return sema.run(options);
}

//===----------------------------------------------------------------------===//
// Diagnostics and locations
//===----------------------------------------------------------------------===//

ErrorReported Sema::error(SMLoc loc, const Twine &message,
                          llvm::ArrayRef<SMRange> ranges) {
  diags.error(loc, message, ranges);
  // Name the layer calls that led here, innermost first.
  unsigned shown = 0;
  for (auto it = frames.rbegin(); it != frames.rend() && shown < 4; ++it) {
    if (!it->site.isValid() || !it->self || it->self->path.empty())
      continue;
    const char *verb = it->mode == Mode::Body ? "creating" : "calling";
    diags.note(it->site, Twine("while ") + verb + " '" +
                             abbreviatePath(it->self->path) + "' (" +
                             it->self->typeName + ")");
    ++shown;
  }
  return {};
}

/// `rnn.rest.rest.rest.rest.cell` as `rnn.rest[4 times].cell`: a path
/// through a recursive layer repeats one member many times over.
std::string Sema::abbreviatePath(llvm::StringRef path) {
  llvm::SmallVector<llvm::StringRef> parts;
  path.split(parts, '.');
  std::string out;
  for (size_t i = 0; i < parts.size();) {
    size_t run = 1;
    while (i + run < parts.size() && parts[i + run] == parts[i])
      ++run;
    out += (out.empty() ? "" : ".") + parts[i].str();
    if (run > 3)
      out += "[" + std::to_string(run) + " times]";
    else
      for (size_t k = 1; k < run; ++k)
        out += "." + parts[i].str();
    i += run;
  }
  return out;
}

void Sema::reportNestingLimit(SMLoc loc, SMRange range,
                              const std::string &what) {
  // The chain's outermost layer, where the user can see the recursion start.
  const Frame *outermost = nullptr;
  for (const Frame &f : frames)
    if (f.site.isValid() && f.self && !f.self->path.empty()) {
      outermost = &f;
      break;
    }
  // Every level of the chain hits the limit again on its way out (each
  // creates or calls more than one thing): one error per chain says it all.
  if (outermost && !nestingReported.insert(outermost->self).second)
    return;
  diags.error(loc,
              "layers nest more than " + std::to_string(kMaxDepth) +
                  " deep, the limit (docs/language.md, 'Limits'), " + what,
              range.isValid() ? llvm::ArrayRef<SMRange>(range)
                              : llvm::ArrayRef<SMRange>());
  if (outermost)
    diags.note(outermost->site, "the chain starts at '" +
                                    outermost->self->path + "' (" +
                                    outermost->self->typeName + "), here");
}

bool Sema::containsItself(const LayerInstance &instance) {
  // A layer's body depends only on its hyper-parameters, so one that creates
  // a layer of its own kind with the same values would do so forever.
  auto sameValue = [](const Val &a, const Val &b) {
    if (a.kind != b.kind)
      return false;
    switch (a.kind) {
    case Val::Kind::Int:
    case Val::Kind::Size:
      return a.i == b.i;
    case Val::Kind::Float:
      return a.f == b.f;
    case Val::Kind::Bool:
      return a.b == b.b;
    case Val::Kind::String:
    case Val::Kind::Symbol:
      return a.s == b.s;
    case Val::Kind::ElementType:
      return a.dtype == b.dtype;
    case Val::Kind::None:
      return true;
    case Val::Kind::Initializer:
      return a.initializer.str() == b.initializer.str();
    default:
      return false; // tensors, lists, layers: not compared, never "the same"
    }
  };
  // frames.back() is the new instance's own frame.
  for (size_t f = 0; f + 1 < frames.size(); ++f) {
    const LayerInstance *ancestor = frames[f].self;
    if (frames[f].mode != Mode::Body || !ancestor ||
        ancestor->def != instance.def)
      continue;
    bool same = true;
    for (const HyperParam &hp : instance.def->hyperParams) {
      auto mine = instance.members.vars.find(hp.name);
      auto theirs = ancestor->members.vars.find(hp.name);
      same = same && mine != instance.members.vars.end() &&
             theirs != ancestor->members.vars.end() &&
             sameValue(mine->second, theirs->second);
    }
    if (!same)
      continue;
    diags.error(frames.back().site,
                "layer '" + instance.typeName + "' contains itself: '" +
                    abbreviatePath(instance.path) +
                    "' would be created with the same hyper-parameters as '" +
                    abbreviatePath(ancestor->path) +
                    "', which contains it, and so on without end");
    if (frames[f].site.isValid())
      diags.note(frames[f].site,
                 "'" + abbreviatePath(ancestor->path) + "' is created here");
    return true;
  }
  return false;
}

SourcePos Sema::position(SMLoc loc) const {
  SourcePos pos;
  llvm::SourceMgr &sm = diags.getSourceMgr();
  unsigned id = sm.FindBufferContainingLoc(loc);
  if (!id)
    return pos;
  pos.file = sm.getMemoryBuffer(id)->getBufferIdentifier().str();
  std::tie(pos.line, pos.col) = sm.getLineAndColumn(loc, id);
  return pos;
}

SourceTrace Sema::traceAt(SMLoc loc) const {
  SourceTrace trace{position(loc)};
  for (auto it = frames.rbegin(); it != frames.rend(); ++it)
    if (it->site.isValid() && it->mode == Mode::Forward)
      trace.push_back(position(it->site));
  return trace;
}

void Sema::suggestName(const std::string &name, SMRange range) {
  std::vector<std::string> candidates;
  for (const Frame &f : frames)
    for (Scope *s = f.scope; s; s = s->parent)
      for (const auto &entry : s->vars)
        candidates.push_back(entry.first);
  for (const auto &entry : program.definitions)
    candidates.push_back(entry.first);
  for (const Builtin &b : builtinTable())
    candidates.push_back(b.name);
  for (const char *extra : {"f32", "f16", "bf16", "i32", "i8", "inf", "pi"})
    candidates.push_back(extra);

  std::string best = closestMatch(name, candidates);
  if (best.empty())
    error(range.Start, "unknown name '" + name + "'", {range});
  else
    error(range.Start,
          "unknown name '" + name + "'; did you mean '" + best + "'?", {range});
  // A called name that is not a misspelt layer or variable: list the builtins
  // nearest to it, since the one meant may be spelled quite differently
  // (`sigmoid` for `logistic`), and say where the whole list is.
  if (!evaluatingCallee || !(best.empty() || findBuiltin(best)))
    return;
  std::vector<std::string> builtins;
  for (const Builtin &b : builtinTable())
    builtins.push_back(b.name);
  std::vector<std::string> nearest = nearestMatches(name, builtins, 4);
  std::string list;
  for (const std::string &candidate : nearest)
    list += (list.empty() ? "'" : ", '") + candidate + "'";
  diags.note(range.Start,
             (list.empty() ? "" : "the nearest builtins are " + list + "; ") +
                 "docs/language.md lists every builtin under 'Builtin "
                 "operations'");
}

std::string Sema::describe(const Val &v) const {
  switch (v.kind) {
  case Val::Kind::Error:
    return "an invalid value";
  case Val::Kind::Int:
    return "the integer " + std::to_string(v.i);
  case Val::Kind::Float:
    return "the number " + ConfigValue::ofFloat(v.f).str();
  case Val::Kind::Bool:
    return v.b ? "true" : "false";
  case Val::Kind::String:
    return "a string";
  case Val::Kind::Size:
    return "a size";
  case Val::Kind::Symbol:
    return "'" + v.s + "'";
  case Val::Kind::ElementType:
    return std::string("the type ") + spell(v.dtype);
  case Val::Kind::Tensor:
    return "a tensor " + typeOf(v.tensor).str();
  case Val::Kind::List:
    return "a list";
  case Val::Kind::Layer:
    return "layer '" + v.layer->path + "' (" + v.layer->typeName + ")";
  case Val::Kind::LayerDef:
    return "the layer definition '" + v.def->name + "'";
  case Val::Kind::Builtin:
    return std::string("the builtin '") + v.builtin->name + "'";
  case Val::Kind::None:
    return "none";
  case Val::Kind::Initializer:
    return "the initializer " + v.initializer.str();
  }
  return "a value";
}

//===----------------------------------------------------------------------===//
// Graph construction
//===----------------------------------------------------------------------===//

std::optional<std::vector<double>> Sema::constantValues(int value) const {
  auto it = constantNodes.find(value);
  if (it == constantNodes.end())
    return std::nullopt;
  const Node &node = graph.nodes[it->second];
  if (node.op == "broadcast") {
    // A broadcast of a constant stays an op (a table added to every
    // example of a batch is not copied batch times), but an op of it and
    // other constants folds.
    std::optional<std::vector<double>> source =
        constantValues(node.operands[0]);
    if (!source)
      return std::nullopt;
    return foldConstant("broadcast", {&*source}, {typeOf(node.operands[0])},
                        typeOf(value), node.attrs);
  }
  for (const NamedAttr &attr : node.attrs) {
    if (attr.name != "value")
      continue;
    if (const auto *elements = std::get_if<std::vector<double>>(&attr.value))
      return *elements;
    if (const auto *splat = std::get_if<double>(&attr.value))
      return std::vector<double>(
          size_t(shape::numElements(typeOf(value).shape).value_or(0)), *splat);
  }
  return std::nullopt;
}

std::optional<double> Sema::splatValue(int value) const {
  auto it = constantNodes.find(value);
  if (it == constantNodes.end())
    return std::nullopt;
  const Node &node = graph.nodes[it->second];
  if (node.op == "broadcast")
    return splatValue(node.operands[0]);
  for (const NamedAttr &attr : node.attrs)
    if (const auto *splat = std::get_if<double>(&attr.value);
        splat && attr.name == "value")
      return *splat;
  return std::nullopt;
}

int Sema::emit(llvm::StringRef op, std::vector<int> operands, TensorType result,
               std::vector<NamedAttr> attrs, SMLoc loc) {
  // An op of constants is computed now (ConstantFolding.cpp): a table the
  // model builds from arange and numbers is baked into the program. A large
  // constant stays an op, and so does an op of one (the sum of a splat
  // would otherwise spell the splat out first).
  auto small = [](const TensorType &type) {
    return shape::numElements(type.shape).value_or(INT64_MAX) <=
           kMaxFoldedElements;
  };
  if (op != "constant" && op != "broadcast" && !operands.empty() &&
      small(result) && llvm::all_of(operands, [&](int v) {
        return constantNodes.count(v) != 0 && small(typeOf(v));
      })) {
    std::vector<std::vector<double>> data;
    std::vector<TensorType> types;
    for (int v : operands) {
      data.push_back(*constantValues(v));
      types.push_back(typeOf(v));
    }
    std::vector<const std::vector<double> *> pointers;
    for (const std::vector<double> &d : data)
      pointers.push_back(&d);
    if (std::optional<std::vector<double>> folded =
            foldConstant(op, pointers, types, result, attrs))
      return emit("constant", {}, std::move(result),
                  {{"value", std::move(*folded)}}, loc);
  }
  spendWork(loc);
  Node node;
  node.op = op.str();
  node.operands = std::move(operands);
  node.attrs = std::move(attrs);
  node.result = graph.addValue(std::move(result));
  node.scope = frames.empty() || !frame().self ? "" : frame().self->path;
  node.trace = traceAt(loc);
  node.checkpoint = checkpointBlock;
  if (node.op == "constant" ||
      (node.op == "broadcast" && constantNodes.count(node.operands[0]) &&
       small(graph.values[node.result])))
    constantNodes[node.result] = graph.nodes.size();
  graph.nodes.push_back(std::move(node));
  return graph.nodes.back().result;
}

std::vector<int> Sema::emitResults(llvm::StringRef op,
                                   std::vector<int> operands,
                                   std::vector<TensorType> results,
                                   std::vector<NamedAttr> attrs, SMLoc loc) {
  std::vector<int> values{
      emit(op, std::move(operands), results.front(), std::move(attrs), loc)};
  for (size_t k = 1; k < results.size(); ++k) {
    values.push_back(graph.addValue(std::move(results[k])));
    graph.nodes.back().moreResults.push_back(values.back());
  }
  return values;
}

bool Sema::updateBuffer(int value, int updated) {
  for (BufferMember &buffer : bufferMembers) {
    Val &current = buffer.layer->members.vars[buffer.name];
    if (current.isTensor() && current.tensor == value) {
      current = Val::ofTensor(updated);
      return true;
    }
  }
  return false;
}

bool Sema::spendWork(SMLoc loc) {
  if (++work <= kMaxWork)
    return true;
  if (!tooLarge)
    error(loc, "the model is too large to elaborate (over " +
                   Twine(uint64_t(kMaxWork)) + " ops, parameters and layers)");
  tooLarge = true;
  return false;
}

int Sema::splat(double value, TensorType type, SMLoc loc) {
  return emit("constant", {}, std::move(type), {{"value", value}}, loc);
}

int Sema::broadcastTo(int value, const shape::Shape &target, SMLoc loc) {
  const TensorType &type = typeOf(value);
  if (type.shape == target)
    return value;
  return emit("broadcast", {value}, TensorType{type.dtype, target}, {}, loc);
}

//===----------------------------------------------------------------------===//
// Coercions
//===----------------------------------------------------------------------===//

/// A coercion's failure: "WHAT must be EXPECTED, not V", unless `v` is an
/// error already reported where it arose.
ErrorReported Sema::notA(const Val &v, SMRange range, const llvm::Twine &what,
                         const char *expected) {
  if (!v.isError())
    error(range.Start, what + " must be " + expected + ", not " + describe(v),
          {range});
  return {};
}

std::optional<int64_t> Sema::asInt(const Val &v, SMRange range,
                                   const llvm::Twine &what) {
  if (v.kind == Val::Kind::Int)
    return v.i;
  if (v.kind == Val::Kind::Float && std::floor(v.f) == v.f &&
      std::fabs(v.f) < 9e15)
    return int64_t(v.f);
  return notA(v, range, what, "an integer");
}

std::optional<double> Sema::asNumber(const Val &v, SMRange range,
                                     const llvm::Twine &what) {
  if (v.isNumber())
    return v.number();
  return notA(v, range, what, "a number");
}

std::optional<bool> Sema::asBool(const Val &v, SMRange range,
                                 const llvm::Twine &what) {
  if (v.kind == Val::Kind::Bool)
    return v.b;
  return notA(v, range, what, "true or false");
}

std::optional<std::vector<int64_t>> Sema::asIntList(const Val &v, SMRange range,
                                                    const llvm::Twine &what) {
  if (v.kind == Val::Kind::Int)
    return std::vector<int64_t>{v.i};
  if (v.kind != Val::Kind::List)
    return notA(v, range, what, "an integer or a list of integers");
  std::vector<int64_t> out;
  for (const Val &e : v.list) {
    auto i = asInt(e, range, what + " entries");
    if (!i)
      return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

std::optional<int> Sema::asTensor(const Val &v, SMRange range,
                                  const llvm::Twine &what) {
  if (v.isTensor())
    return v.tensor;
  return notA(v, range, what, "a tensor");
}

std::optional<int> Sema::asFloatTensor(const Val &v, SMRange range,
                                       const llvm::Twine &what) {
  auto t = asTensor(v, range, what);
  if (!t)
    return std::nullopt;
  if (!isFloat(typeOf(*t).dtype))
    return error(range.Start,
                 what + " must be a floating-point tensor, not " +
                     typeOf(*t).str(),
                 {range});
  return t;
}

std::optional<ElementType> Sema::asDType(const Val &v, SMRange range,
                                         const llvm::Twine &what) {
  if (v.kind == Val::Kind::ElementType)
    return v.dtype;
  return notA(v, range, what, "an element type (f32, f16, bf16, i32, i8)");
}

#define BOUND_ARG_COERCION(Type, Name)                                         \
  std::optional<Type> BoundArgs::Name(size_t slot, const llvm::Twine &what) {  \
    return sema->Name(values[slot], ranges[slot], what);                       \
  }
BOUND_ARG_COERCION(int64_t, asInt)
BOUND_ARG_COERCION(double, asNumber)
BOUND_ARG_COERCION(bool, asBool)
BOUND_ARG_COERCION(std::vector<int64_t>, asIntList)
BOUND_ARG_COERCION(int, asTensor)
BOUND_ARG_COERCION(int, asFloatTensor)
BOUND_ARG_COERCION(ElementType, asDType)
#undef BOUND_ARG_COERCION

std::optional<int64_t> BoundArgs::intOr(size_t slot, int64_t dflt,
                                        const char *what) {
  return has(slot) ? asInt(slot, what) : dflt;
}
std::optional<double> BoundArgs::numberOr(size_t slot, double dflt,
                                          const char *what) {
  return has(slot) ? asNumber(slot, what) : dflt;
}
std::optional<bool> BoundArgs::boolOr(size_t slot, bool dflt,
                                      const char *what) {
  return has(slot) ? asBool(slot, what) : dflt;
}

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

static const char *verb(BinaryOp op) {
  switch (op) {
#define BINARY_OP(Name, Spelling, Verb)                                        \
  case BinaryOp::Name:                                                         \
    return Verb;
#include "frontend/BinaryOps.def"
  }
  return "?";
}

/// The elementwise op of an arithmetic operator on tensors (BinaryOps.def
/// lists Add, Sub, Mul and Div first); null for the others.
static const char *opName(BinaryOp op) {
  static const char *const names[] = {"add", "sub", "mul", "div"};
  static_assert(int(BinaryOp::Div) == 3);
  return int(op) <= int(BinaryOp::Div) ? names[int(op)] : nullptr;
}

/// Arithmetic on two compile-time numbers, Python style: `/` gives a float,
/// `//` and `%` floor, integers stay integers and never overflow silently.
static std::optional<Val> foldNumbers(BinaryOp op, const Val &a, const Val &b,
                                      std::string &why) {
  if (op == BinaryOp::MatMul) {
    why = "'@' needs tensors";
    return std::nullopt;
  }
  bool dividing =
      op == BinaryOp::Div || op == BinaryOp::FloorDiv || op == BinaryOp::Mod;
  if (dividing && b.number() == 0) {
    why = "division by zero";
    return std::nullopt;
  }
  bool ints = a.kind == Val::Kind::Int && b.kind == Val::Kind::Int;
  if (ints) {
    int64_t x = a.i, y = b.i, r = 0;
    switch (op) {
    case BinaryOp::Add:
      if (__builtin_add_overflow(x, y, &r))
        break;
      return Val::ofInt(r);
    case BinaryOp::Sub:
      if (__builtin_sub_overflow(x, y, &r))
        break;
      return Val::ofInt(r);
    case BinaryOp::Mul:
      if (__builtin_mul_overflow(x, y, &r))
        break;
      return Val::ofInt(r);
    case BinaryOp::FloorDiv:
    case BinaryOp::Mod: {
      if (x == std::numeric_limits<int64_t>::min() && y == -1)
        break;
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Val::ofInt(op == BinaryOp::FloorDiv ? q : m);
    }
    case BinaryOp::Pow: {
      if (y < 0)
        return Val::ofFloat(std::pow(double(x), double(y)));
      int64_t result = 1;
      for (int64_t k = 0; k < y; ++k) {
        if (__builtin_mul_overflow(result, x, &result)) {
          why = "integer overflow";
          return std::nullopt;
        }
        if (result == 0 || result == 1)
          break;
      }
      return Val::ofInt(result);
    }
    case BinaryOp::Div:
      return Val::ofFloat(double(x) / double(y));
    default:
      return std::nullopt; // comparisons are handled by compare()
    }
    why = "integer overflow";
    return std::nullopt;
  }
  double x = a.number(), y = b.number();
  switch (op) {
  case BinaryOp::Add:
    return Val::ofFloat(x + y);
  case BinaryOp::Sub:
    return Val::ofFloat(x - y);
  case BinaryOp::Mul:
    return Val::ofFloat(x * y);
  case BinaryOp::Div:
    return Val::ofFloat(x / y);
  case BinaryOp::FloorDiv:
  case BinaryOp::Mod:
    return Val::ofFloat(op == BinaryOp::FloorDiv ? std::floor(x / y)
                                                 : x - std::floor(x / y) * y);
  case BinaryOp::Pow:
    return Val::ofFloat(std::pow(x, y));
  default:
    return std::nullopt;
  }
}

/// Comparisons are decided at compile time, on numbers, bools and names.
static std::optional<bool> compare(BinaryOp op, const Val &a, const Val &b) {
  auto order = [&](int c) {
    switch (op) {
    case BinaryOp::Eq:
      return c == 0;
    case BinaryOp::Ne:
      return c != 0;
    case BinaryOp::Lt:
      return c < 0;
    case BinaryOp::Le:
      return c <= 0;
    case BinaryOp::Gt:
      return c > 0;
    default:
      return c >= 0;
    }
  };
  if (a.isNumber() && b.isNumber()) {
    double x = a.number(), y = b.number();
    return order(x < y ? -1 : x > y ? 1 : 0);
  }
  bool equality = op == BinaryOp::Eq || op == BinaryOp::Ne;
  auto text = [](const Val &v) -> std::optional<std::string> {
    if (v.kind == Val::Kind::String || v.kind == Val::Kind::Symbol)
      return v.s;
    if (v.kind == Val::Kind::ElementType)
      return std::string(spell(v.dtype));
    return std::nullopt;
  };
  if (text(a) && text(b))
    return order(text(a)->compare(*text(b)));
  if (equality && a.kind == Val::Kind::Bool && b.kind == Val::Kind::Bool)
    return order(a.b == b.b ? 0 : 1);
  // `init == none`: whether a hyper-parameter was given, whatever it holds.
  if (equality && (a.kind == Val::Kind::None || b.kind == Val::Kind::None))
    return order(a.kind == b.kind ? 0 : 1);
  return std::nullopt;
}

/// Both operands as tensors of one shape (numpy broadcasting), a number
/// becoming a constant of the other's type; nullopt after an error.
std::optional<std::pair<int, int>>
Sema::broadcastPair(const Val &lhs, const Val &rhs, SMLoc loc, SMRange lhsRange,
                    SMRange rhsRange, const std::string &what) {
  SMRange whole{lhsRange.Start, rhsRange.End};
  auto constant = [&](const Val &number, const TensorType &like,
                      SMRange range) -> std::optional<int> {
    if (!number.isNumber() && number.kind != Val::Kind::Bool)
      return error(range.Start,
                   "cannot " + what + " " + describe(number) + " and " +
                       like.str(),
                   {range});
    if (!isFloat(like.dtype) && number.kind == Val::Kind::Float)
      return error(range.Start,
                   "cannot " + what + " " + describe(number) +
                       " and the integer tensor " + like.str() + " (use cast)",
                   {range});
    double value =
        number.kind == Val::Kind::Bool ? double(number.b) : number.number();
    return splat(value, like, loc);
  };
  if (!lhs.isTensor()) {
    auto c = constant(lhs, typeOf(rhs.tensor), lhsRange);
    return c ? std::optional(std::pair(*c, rhs.tensor)) : std::nullopt;
  }
  if (!rhs.isTensor()) {
    auto c = constant(rhs, typeOf(lhs.tensor), rhsRange);
    return c ? std::optional(std::pair(lhs.tensor, *c)) : std::nullopt;
  }
  const TensorType &ta = typeOf(lhs.tensor), &tb = typeOf(rhs.tensor);
  shape::ShapeResult r = shape::broadcast(ta.shape, tb.shape);
  if (!r.ok())
    return error(loc,
                 "cannot " + what + " " + ta.str() + " and " + tb.str() + ": " +
                     r.error,
                 {whole});
  return std::pair(broadcastTo(lhs.tensor, r.shape, loc),
                   broadcastTo(rhs.tensor, r.shape, loc));
}

Val Sema::compareTensors(BinaryOp op, const Val &lhs, const Val &rhs, SMLoc loc,
                         SMRange lhsRange, SMRange rhsRange) {
  SMRange whole{lhsRange.Start, rhsRange.End};
  for (const Val *v : {&lhs, &rhs})
    if (v->isTensor() && typeOf(v->tensor).dtype == ElementType::I1)
      return error(loc,
                   "cannot compare the boolean mask " +
                       typeOf(v->tensor).str() +
                       "; combine masks with 'and', 'or' and 'not'",
                   {whole});
  if (lhs.isTensor() && rhs.isTensor()) {
    ElementType a = typeOf(lhs.tensor).dtype, b = typeOf(rhs.tensor).dtype;
    if (a != b && !(isFloat(a) && isFloat(b)))
      return error(loc,
                   "cannot compare " + typeOf(lhs.tensor).str() + " with " +
                       typeOf(rhs.tensor).str() +
                       ": element types differ (use cast)",
                   {whole});
  }
  auto pair = broadcastPair(lhs, rhs, loc, lhsRange, rhsRange, "compare");
  if (!pair)
    return Val::error();
  static const char *const predicates[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  std::string predicate = predicates[int(op) - int(BinaryOp::Eq)];
  TensorType mask{ElementType::I1, typeOf(pair->first).shape};
  return Val::ofTensor(emit("compare", {pair->first, pair->second}, mask,
                            {{"predicate", predicate}}, loc));
}

Val Sema::logicalTensors(const char *kind, const Val &lhs, const Val &rhs,
                         SMLoc loc, SMRange lhsRange, SMRange rhsRange) {
  SMRange whole{lhsRange.Start, rhsRange.End};
  if (lhs.isError() || rhs.isError())
    return Val::error();
  for (const Val *v : {&lhs, &rhs})
    if (!(v->isTensor() && typeOf(v->tensor).dtype == ElementType::I1))
      return error(loc,
                   std::string("'") + kind +
                       "' of tensors takes two boolean masks " +
                       "(comparisons such as 'ids == 0'), not " + describe(*v),
                   {whole});
  auto pair = broadcastPair(lhs, rhs, loc, lhsRange, rhsRange, kind);
  if (!pair)
    return Val::error();
  return Val::ofTensor(emit("logical", {pair->first, pair->second},
                            typeOf(pair->first), {{"kind", std::string(kind)}},
                            loc));
}

Val Sema::binary(BinaryOp op, const Val &lhs, const Val &rhs, SMLoc loc,
                 SMRange lhsRange, SMRange rhsRange) {
  if (lhs.isError() || rhs.isError())
    return Val::error();
  SMRange whole{lhsRange.Start, rhsRange.End};
  if (isComparison(op) && (lhs.isTensor() || rhs.isTensor()))
    return compareTensors(op, lhs, rhs, loc, lhsRange, rhsRange);
  if (isComparison(op)) {
    if (auto result = compare(op, lhs, rhs))
      return Val::ofBool(*result);
    return error(loc,
                 Twine("cannot compare ") + describe(lhs) + " with " +
                     describe(rhs) +
                     " (comparisons are decided at compile time, on numbers, "
                     "bools and strings)",
                 {whole});
  }
  if (op == BinaryOp::Add && lhs.kind == Val::Kind::List &&
      rhs.kind == Val::Kind::List) {
    // [a, b] + [c]: one list after the other, as in Python (a forward
    // collecting per-layer states in a `for` loop).
    Val joined = lhs;
    joined.list.insert(joined.list.end(), rhs.list.begin(), rhs.list.end());
    return joined;
  }
  if (lhs.isNumber() && rhs.isNumber()) {
    std::string why;
    if (auto v = foldNumbers(op, lhs, rhs, why))
      return *v;
    return error(loc,
                 Twine("cannot ") + verb(op) + " " + describe(lhs) + " and " +
                     describe(rhs) + ": " + why,
                 {whole});
  }
  bool lhsOk = lhs.isNumber() || lhs.isTensor();
  bool rhsOk = rhs.isNumber() || rhs.isTensor();
  if (!lhsOk || !rhsOk)
    return error(loc,
                 Twine("cannot ") + verb(op) + " " + describe(lhs) + " and " +
                     describe(rhs),
                 {lhsOk ? rhsRange : lhsRange});

  if (op == BinaryOp::MatMul) {
    if (!lhs.isTensor() || !rhs.isTensor())
      return error(loc,
                   "'@' needs two tensors, not " + describe(lhs) + " and " +
                       describe(rhs),
                   {whole});
    return matmul(lhs.tensor, rhs.tensor, loc, whole);
  }

  if (op == BinaryOp::Pow) {
    if (!lhs.isTensor() || !rhs.isNumber())
      return error(loc,
                   "'**' raises a tensor to a constant exponent, not " +
                       describe(lhs) + " to " + describe(rhs),
                   {whole});
    const TensorType &t = typeOf(lhs.tensor);
    if (!isFloat(t.dtype))
      return error(loc, "'**' needs a floating-point tensor, not " + t.str(),
                   {lhsRange});
    return Val::ofTensor(
        emit("pow", {lhs.tensor}, t, {{"exponent", rhs.number()}}, loc));
  }

  const char *name = opName(op);
  bool integerOnly = op == BinaryOp::FloorDiv || op == BinaryOp::Mod;
  if (!name && !integerOnly)
    return error(loc,
                 Twine("'") + spell(op) + "' works on numbers, not tensors",
                 {whole});

  if (lhs.isTensor() && rhs.isTensor() &&
      typeOf(lhs.tensor).dtype != typeOf(rhs.tensor).dtype)
    return error(loc,
                 Twine("cannot ") + verb(op) + " " + typeOf(lhs.tensor).str() +
                     " and " + typeOf(rhs.tensor).str() +
                     ": element types differ (use cast)",
                 {whole});
  // A number next to a tensor becomes a constant of the tensor's type.
  auto pair = broadcastPair(lhs, rhs, loc, lhsRange, rhsRange, verb(op));
  if (!pair)
    return Val::error();
  int a = pair->first, b = pair->second;
  if (typeOf(a).dtype == ElementType::I1)
    return error(loc, Twine("cannot ") + verb(op) + " boolean masks", {whole});
  TensorType result = typeOf(a);
  if (!isFloat(result.dtype) && (op == BinaryOp::Div || integerOnly))
    return integerDivision(op, a, b, loc);
  if (integerOnly)
    return error(
        loc,
        Twine("'") + spell(op) +
            "' of floating-point tensors is not supported (there is no "
            "floor op yet); it works on integer tensors, as "
            "torch.floor_divide and torch.remainder",
        {whole});
  return Val::ofTensor(emit(name, {a, b}, result, {}, loc));
}

Val Sema::integerDivision(BinaryOp op, int a, int b, SMLoc loc) {
  TensorType type = typeOf(a);
  if (op == BinaryOp::Div) {
    // torch's true division: integers divide as f32.
    TensorType real{ElementType::F32, type.shape};
    return Val::ofTensor(emit(
        "div",
        {emit("cast", {a}, real, {}, loc), emit("cast", {b}, real, {}, loc)},
        real, {}, loc));
  }
  // A zero divisor: an error when it is a constant; in data, the kernels
  // must not trap (SIGFPE), so a zero divides as one and the quotient and
  // remainder are then 0 (PyTorch raises instead).
  std::optional<double> repeated = splatValue(b);
  if (std::optional<std::vector<double>> divisor =
          repeated ? std::vector<double>{*repeated} : constantValues(b)) {
    if (llvm::is_contained(*divisor, 0.0))
      return error(loc, "integer division by zero");
  } else {
    TensorType maskType{ElementType::I1, type.shape};
    int isZero = emit("compare", {b, splat(0, type, loc)}, maskType,
                      {{"predicate", std::string("eq")}}, loc);
    b = emit("where", {isZero, splat(1, type, loc), b}, type, {}, loc);
    return Val::ofTensor(emit(
        "where", {isZero, splat(0, type, loc), flooredDivision(op, a, b, loc)},
        type, {}, loc));
  }
  return Val::ofTensor(flooredDivision(op, a, b, loc));
}

int Sema::flooredDivision(BinaryOp op, int a, int b, SMLoc loc) {
  TensorType type = typeOf(a);
  // The kernels' integer division truncates toward zero (C's); Python's
  // floors. Where the remainder is nonzero and its sign differs from the
  // divisor's, the floored quotient is one less and the floored remainder
  // is the truncated one plus the divisor.
  int quotient = emit("div", {a, b}, type, {}, loc);
  int remainder = emit("sub", {a, emit("mul", {quotient, b}, type, {}, loc)},
                       type, {}, loc);
  TensorType mask{ElementType::I1, type.shape};
  int zero = splat(0, type, loc);
  auto compare = [&](const char *predicate, int x, int y) {
    return emit("compare", {x, y}, mask,
                {{"predicate", std::string(predicate)}}, loc);
  };
  auto logical = [&](const char *kind, std::vector<int> masks) {
    return emit("logical", std::move(masks), mask,
                {{"kind", std::string(kind)}}, loc);
  };
  // (r < 0 and b >= 0) or (r > 0 and b < 0)
  int divisorNegative = compare("lt", b, zero);
  int adjust = logical(
      "or",
      {logical("and", {compare("lt", remainder, zero),
                       logical("not", {divisorNegative})}),
       logical("and", {compare("gt", remainder, zero), divisorNegative})});
  if (op == BinaryOp::FloorDiv)
    return emit("sub",
                {quotient, emit("where", {adjust, splat(1, type, loc), zero},
                                type, {}, loc)},
                type, {}, loc);
  return emit("add",
              {remainder, emit("where", {adjust, b, zero}, type, {}, loc)},
              type, {}, loc);
}

Val Sema::matmul(int lhs, int rhs, SMLoc loc, SMRange range) {
  TensorType ta = typeOf(lhs), tb = typeOf(rhs);
  auto fail = [&](const std::string &why) {
    return error(loc,
                 "cannot matmul " + ta.str() + " by " + tb.str() + ": " + why,
                 {range});
  };
  if (!isFloat(ta.dtype) || !isFloat(tb.dtype))
    return (fail("matmul needs floating-point operands"));
  if (ta.dtype != tb.dtype)
    return (fail("element types differ (use cast)"));
  if (ta.shape.size() < 2 || tb.shape.size() < 2)
    return (fail("both operands need rank >= 2 (reshape a vector to [1, n])"));
  if (tb.shape.size() == 2) {
    shape::ShapeResult r = shape::matmul(ta.shape, tb.shape, false, false);
    if (!r.ok())
      return (fail(r.error));
    return Val::ofTensor(
        emit("matmul", {lhs, rhs}, {ta.dtype, r.shape}, {}, loc));
  }
  // Batched: broadcast the leading dimensions, as torch.matmul does.
  shape::Shape batchA(ta.shape.begin(), ta.shape.end() - 2);
  shape::Shape batchB(tb.shape.begin(), tb.shape.end() - 2);
  shape::ShapeResult batch = shape::broadcast(batchA, batchB);
  if (!batch.ok())
    return (fail("batch dimensions: " + batch.error));
  shape::Shape fullA = batch.shape, fullB = batch.shape;
  fullA.insert(fullA.end(), ta.shape.end() - 2, ta.shape.end());
  fullB.insert(fullB.end(), tb.shape.end() - 2, tb.shape.end());
  shape::ShapeResult r = shape::batchMatmul(fullA, fullB, false, false);
  if (!r.ok())
    return (fail(r.error));
  int a = broadcastTo(lhs, fullA, loc), b = broadcastTo(rhs, fullB, loc);
  return Val::ofTensor(
      emit("batch_matmul", {a, b}, {ta.dtype, r.shape}, {}, loc));
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

Val Sema::eval(const Expr &expr) {
  switch (expr.getKind()) {
  case Expr::Kind::Number: {
    auto &n = cast<NumberExpr>(expr);
    return n.isInt ? Val::ofInt(n.intValue) : Val::ofFloat(n.floatValue);
  }
  case Expr::Kind::Size:
    return Val::of(Val::Kind::Size, &Val::i, cast<SizeExpr>(expr).bytes);
  case Expr::Kind::Bool:
    return Val::ofBool(cast<BoolExpr>(expr).value);
  case Expr::Kind::String:
    return Val::of(Val::Kind::String, &Val::s, cast<StringExpr>(expr).value);
  case Expr::Kind::Name:
    return evalName(cast<NameExpr>(expr));
  case Expr::Kind::Member:
    return evalMember(cast<MemberExpr>(expr));
  case Expr::Kind::Call:
    return evalCall(cast<CallExpr>(expr));
  case Expr::Kind::Unary: {
    auto &u = cast<UnaryExpr>(expr);
    Val v = eval(*u.operand);
    if (v.isError())
      return v;
    if (u.op == '!' && v.isTensor()) {
      if (typeOf(v.tensor).dtype != ElementType::I1)
        return error(
            expr.loc(),
            "'not' of a tensor takes a boolean mask (a comparison such as "
            "'ids == 0'), not " +
                describe(v),
            {expr.getRange()});
      return Val::ofTensor(emit("logical", {v.tensor}, typeOf(v.tensor),
                                {{"kind", std::string("not")}}, expr.loc()));
    }
    if (u.op == '!') {
      auto b = asBool(v, u.operand->getRange(), "the operand of 'not'");
      return b ? Val::ofBool(!*b) : Val::error();
    }
    if (v.kind == Val::Kind::Int) {
      if (v.i == std::numeric_limits<int64_t>::min())
        return error(expr.loc(), "integer overflow", {expr.getRange()});
      return Val::ofInt(-v.i);
    }
    if (v.kind == Val::Kind::Float)
      return Val::ofFloat(-v.f);
    if (v.isTensor() && isFloat(typeOf(v.tensor).dtype))
      return Val::ofTensor(
          emit("neg", {v.tensor}, typeOf(v.tensor), {}, expr.loc()));
    return error(expr.loc(), "cannot negate " + describe(v), {expr.getRange()});
  }
  case Expr::Kind::Binary: {
    auto &b = cast<BinaryExpr>(expr);
    if (b.op == BinaryOp::And || b.op == BinaryOp::Or) {
      // Short-circuit, so `use_bias and size(x, 0) > 1` can guard the rest.
      const char *what =
          b.op == BinaryOp::And ? "an operand of 'and'" : "an operand of 'or'";
      Val first = eval(*b.lhs);
      if (first.isTensor()) // masks: elementwise, both sides always
        return logicalTensors(b.op == BinaryOp::And ? "and" : "or", first,
                              eval(*b.rhs), b.opLoc, b.lhs->getRange(),
                              b.rhs->getRange());
      auto lhs = asBool(first, b.lhs->getRange(), what);
      if (!lhs)
        return Val::error();
      if (*lhs == (b.op == BinaryOp::Or))
        return Val::ofBool(*lhs);
      auto rhs = asBool(eval(*b.rhs), b.rhs->getRange(), what);
      return rhs ? Val::ofBool(*rhs) : Val::error();
    }
    Val lhs = eval(*b.lhs);
    Val rhs = eval(*b.rhs);
    return binary(b.op, lhs, rhs, b.opLoc, b.lhs->getRange(),
                  b.rhs->getRange());
  }
  case Expr::Kind::List: {
    Val v(Val::Kind::List);
    for (const ExprPtr &e : cast<ListExpr>(expr).elements) {
      v.list.push_back(eval(*e));
      if (v.list.back().isError())
        return Val::error();
    }
    return v;
  }
  case Expr::Kind::Repeat:
    return error(
        expr.loc(),
        "'repeat' creates layers, so it belongs in a layer or model body as "
        "'let name = repeat N { Layer(...) }'",
        {expr.getRange()});
  }
  return Val::error();
}

std::string Sema::expandName(const std::string &name, SMRange range) {
  size_t open = name.find('{');
  if (open == std::string::npos)
    return name;
  std::string expanded = name.substr(0, open);
  while (open != std::string::npos) {
    size_t close = name.find('}', open);
    std::string index = name.substr(open + 1, close - open - 1);
    Val *v = frames.empty() ? nullptr : frame().scope->lookup(index);
    if (!v || v->kind != Val::Kind::Int) {
      error(range.Start,
            "'{" + index + "}' in the name '" + name +
                "' must name a compile-time integer (a 'for' loop's "
                "index), not " +
                (v ? describe(*v) : "an unknown name"),
            {range});
      return "";
    }
    expanded += std::to_string(v->i);
    open = name.find('{', close);
    expanded +=
        name.substr(close + 1, open == std::string::npos ? std::string::npos
                                                         : open - close - 1);
  }
  return expanded;
}

Val Sema::evalName(const NameExpr &name) {
  std::string expanded = expandName(name.name, name.getRange());
  if (expanded.empty())
    return Val::error();
  if (!frames.empty())
    if (Val *v = frame().scope->lookup(expanded))
      return *v;
  const Module *from = !frames.empty() && frame().self && frame().self->def
                           ? frame().self->def->module
                           : nullptr;
  if (const Definition *def = program.find(expanded, from))
    return Val::of(Val::Kind::LayerDef, &Val::def, def);
  if (const Builtin *b = findBuiltin(expanded))
    return Val::of(Val::Kind::Builtin, &Val::builtin, b);
  if (auto d = parseElementType(expanded))
    return Val::of(Val::Kind::ElementType, &Val::dtype, *d);
  if (expanded == "training") {
    // A compile-time bool: the forward is elaborated once for training and,
    // when something reads this, once more for evaluation.
    if (frames.empty() || frame().mode != Mode::Forward)
      return error(
          name.loc(),
          "'training' is known in a forward (true in the training step, "
          "false in evaluation), not here",
          {name.getRange()});
    return Val::ofBool(isTraining());
  }
  if (expanded == "inf")
    return Val::ofFloat(std::numeric_limits<double>::infinity());
  if (expanded == "pi")
    return Val::ofFloat(M_PI);
  if (expanded == "none")
    return Val(Val::Kind::None);
  if (namesInitializer(expanded))
    return evalInitializer(name);
  suggestName(expanded, name.getRange());
  return Val::error();
}

Val Sema::evalMember(const MemberExpr &member) {
  Val base = eval(*member.base);
  if (base.isError())
    return base;
  SMRange memberRange{member.memberLoc, member.getRange().End};
  if (base.kind == Val::Kind::Layer) {
    LayerInstance *layer = base.layer;
    if (!layer->sequence.empty() || !layer->def) {
      int64_t index = -1;
      if (llvm::to_integer(member.member, index) && index >= 0 &&
          size_t(index) < layer->sequence.size()) {
        return Val::ofLayer(layer->sequence[index]);
      }
      return error(member.memberLoc,
                   "'" + layer->path + "' is a sequence of " +
                       std::to_string(layer->sequence.size()) +
                       " layers; index it with a number from 0 to " +
                       std::to_string(layer->sequence.size() - 1),
                   {memberRange});
    }
    std::string memberName = expandName(member.member, memberRange);
    if (memberName.empty())
      return Val::error();
    auto it = layer->members.vars.find(memberName);
    if (it != layer->members.vars.end())
      return it->second;
    std::vector<std::string> members;
    for (const auto &entry : layer->members.vars)
      members.push_back(entry.first);
    std::string best = closestMatch(memberName, members);
    return error(member.memberLoc,
                 "layer '" + layer->path + "' (" + layer->typeName +
                     ") has no member '" + memberName + "'" +
                     (best.empty() ? "" : "; did you mean '" + best + "'?"),
                 {memberRange});
  }
  if (base.isTensor()) {
    const TensorType &t = typeOf(base.tensor);
    if (member.member == "T") {
      if (t.shape.size() < 2)
        return error(member.memberLoc, "'.T' needs rank >= 2, not " + t.str(),
                     {memberRange});
      std::vector<int64_t> perm;
      for (size_t i = 0; i < t.shape.size(); ++i)
        perm.push_back(i);
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      shape::ShapeResult r = shape::transpose(t.shape, perm);
      return Val::ofTensor(emit("transpose", {base.tensor}, {t.dtype, r.shape},
                                {{"permutation", perm}}, member.memberLoc));
    }
    return error(member.memberLoc,
                 "a tensor has no member '" + member.member + "' (only '.T')",
                 {memberRange});
  }
  return error(member.memberLoc,
               "cannot take member '" + member.member + "' of " +
                   describe(base),
               {memberRange});
}

Val Sema::evalCall(const CallExpr &call) {
  // Constructors name what they create after the binding they appear in, so
  // take the pending name before evaluating anything nested.
  const std::string *name = pendingName;
  pendingName = nullptr;
  if (auto *callee = dyn_cast<NameExpr>(call.callee.get()))
    if (namesInitializer(callee->name))
      return evalInitializer(call);
  // An unknown callee is most likely a builtin the user misremembers: the
  // diagnostic then lists the nearest ones (suggestName).
  bool wasCallee = evaluatingCallee;
  evaluatingCallee = isa<NameExpr>(call.callee.get());
  Val callee = eval(*call.callee);
  evaluatingCallee = wasCallee;
  switch (callee.kind) {
  case Val::Kind::Error:
    for (const Argument &arg : call.args)
      eval(*arg.value); // still report errors in the arguments
    return Val::error();
  case Val::Kind::Builtin:
    return callBuiltin(*callee.builtin, call);
  case Val::Kind::LayerDef:
    if (callee.def->isModel)
      return error(call.loc(),
                   "'" + callee.def->name +
                       "' is a model; only layers can be used inside "
                       "other definitions",
                   {call.callee->getRange()});
    if (!name || frames.empty() || frame().mode != Mode::Body)
      return error(
          call.loc(),
          "layers are created in a layer or model body, as 'let name = " +
              callee.def->name + "(...)', and called in the forward",
          {call.getRange()});
    return construct(*callee.def, call, *name);
  case Val::Kind::Layer:
    if (frame().mode == Mode::Body)
      return error(call.loc(),
                   "layers are called in a forward, not in the body that "
                   "declares them",
                   {call.getRange()});
    return apply(*callee.layer, call);
  default:
    return error(call.loc(), "cannot call " + describe(callee),
                 {call.callee->getRange()});
  }
}

bool Sema::matchArguments(
    const CallExpr &call, llvm::ArrayRef<llvm::StringRef> params,
    llvm::StringRef kind, const std::string &tooMany,
    llvm::function_ref<std::string(llvm::StringRef)> unknown,
    llvm::function_ref<bool(size_t, const Argument &)> bind) {
  bool ok = true;
  size_t position = 0;
  bool sawKeyword = false;
  std::vector<bool> matched(params.size(), false);
  for (const Argument &arg : call.args) {
    SMRange range = arg.value->getRange();
    sawKeyword |= !arg.name.empty();
    size_t slot = arg.name.empty()
                      ? position++
                      : llvm::find(params, arg.name) - params.begin();
    if (arg.name.empty() && sawKeyword)
      error(range.Start,
            "a positional argument cannot follow a keyword argument", {range});
    else if (arg.name.empty() && slot >= params.size())
      error(range.Start, tooMany, {range});
    else if (slot >= params.size())
      error(arg.nameLoc, unknown(arg.name), {SMRange(arg.nameLoc, range.End)});
    else if (matched[slot])
      error(arg.nameLoc, kind + " '" + arg.name + "' is given twice",
            {SMRange(arg.nameLoc, range.End)});
    else {
      matched[slot] = true;
      ok &= bind(slot, arg);
      continue;
    }
    ok = false;
  }
  return ok;
}

Val Sema::callBuiltin(const Builtin &builtin, const CallExpr &call) {
  BoundArgs args;
  args.sema = this;
  args.callee = builtin.name;
  args.loc = call.loc();
  args.range = call.getRange();
  size_t n = builtin.params.size();
  args.values.assign(n, Val::error());
  args.ranges.assign(n, call.getRange());
  args.given.assign(n, false);
  std::string signature = std::string(builtin.name) + "(";
  for (size_t i = 0; i < n; ++i)
    signature += (i ? ", " : "") + std::string(builtin.params[i]) +
                 (i >= builtin.required ? "=..." : "");
  signature += ")";
  std::vector<llvm::StringRef> params(builtin.params.begin(),
                                      builtin.params.end());
  bool ok = matchArguments(
      call, params, "argument",
      "too many arguments; the signature is " + signature,
      [&](llvm::StringRef name) {
        return "'" + name.str() + "' is not an argument of " + signature;
      },
      [&](size_t slot, const Argument &arg) {
        Val value = eval(*arg.value);
        // `mask = none` (often a layer's hyper-parameter passed on) leaves
        // the argument to its default, as if it were not written.
        if (value.kind == Val::Kind::None)
          return true;
        args.values[slot] = value;
        args.ranges[slot] = arg.value->getRange();
        args.given[slot] = true;
        return !value.isError();
      });
  for (size_t i = 0; ok && i < builtin.required; ++i) {
    if (!args.given[i]) {
      error(call.loc(),
            Twine("missing argument '") + builtin.params[i] +
                "'; the signature is " + signature,
            {call.getRange()});
      ok = false;
    }
  }
  if (!ok)
    return Val::error();
  return builtin.run(*this, args);
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

bool Sema::bindHyperParams(const Definition &def, LayerInstance &instance,
                           const CallExpr *call) {
  bool ok = true;
  auto check = [&](const Val &v, SMRange range, const std::string &name) {
    if (v.isError())
      return false;
    if (v.kind == Val::Kind::Tensor || v.kind == Val::Kind::Layer ||
        v.kind == Val::Kind::LayerDef || v.kind == Val::Kind::Builtin) {
      error(range.Start,
            "hyper-parameter '" + name +
                "' must be known at compile time (a number, a "
                "bool or a type), not " +
                describe(v),
            {range});
      return false;
    }
    return true;
  };
  if (call) {
    // Explicit arguments, evaluated in the caller's scope.
    std::vector<llvm::StringRef> params;
    for (const HyperParam &hp : def.hyperParams)
      params.push_back(hp.name);
    return matchArguments(
        *call, params, "hyper-parameter",
        "too many arguments for layer '" + def.name + "', which takes " +
            std::to_string(params.size()),
        [&](llvm::StringRef name) {
          return "layer '" + def.name + "' has no hyper-parameter '" +
                 name.str() + "'";
        },
        [&](size_t slot, const Argument &arg) {
          Val v = eval(*arg.value);
          if (!check(v, arg.value->getRange(), def.hyperParams[slot].name))
            return false;
          instance.members.vars[def.hyperParams[slot].name] = v;
          return true;
        });
  }
  // Defaults are evaluated inside the instance, so they may use earlier
  // hyper-parameters: layer Attn(dim, heads = dim // 64).
  for (size_t i = 0; i < def.hyperParams.size(); ++i) {
    const HyperParam &hp = def.hyperParams[i];
    if (instance.members.vars.count(hp.name))
      continue;
    if (def.isModel) {
      auto it = overrides.find(hp.name);
      if (it != overrides.end()) {
        llvm::StringRef text = it->second;
        int64_t iv;
        double fv;
        Val v;
        if (!text.getAsInteger(10, iv))
          v = Val::ofInt(iv);
        else if (text == "true" || text == "false")
          v = Val::ofBool(text == "true");
        else if (!text.getAsDouble(fv))
          v = Val::ofFloat(fv);
        else if (auto d = parseElementType(text.str())) {
          v.kind = Val::Kind::ElementType;
          v.dtype = *d;
        } else {
          diags.error(
              "-D " + hp.name + "=" + text +
              ": the value must be an integer, a number, true/false or a type");
          ok = false;
          overrides.erase(it); // reported: not also "has no hyper-parameter"
          continue;
        }
        instance.members.vars[hp.name] = v;
        overrides.erase(it);
        continue;
      }
    }
    if (!hp.defaultValue) {
      if (def.isModel)
        error(hp.range.Start,
              "model hyper-parameter '" + hp.name +
                  "' has no default; pass -D " + hp.name + "=VALUE",
              {hp.range});
      else
        error(frame().site, "missing hyper-parameter '" + hp.name +
                                "' of layer '" + def.name + "'");
      ok = false;
      continue;
    }
    Val v = eval(*hp.defaultValue);
    if (!check(v, hp.defaultValue->getRange(), hp.name)) {
      ok = false;
      continue;
    }
    instance.members.vars[hp.name] = v;
  }
  return ok;
}

Val Sema::construct(const Definition &def, const CallExpr &call,
                    const std::string &name) {
  if (frames.size() >= kMaxDepth) {
    const std::string &prefix = frame().self ? frame().self->path : "";
    reportNestingLimit(
        call.loc(), call.getRange(),
        "creating '" +
            abbreviatePath(prefix.empty() ? name : prefix + "." + name) +
            "' (" + def.name + ")");
    return Val::error();
  }
  if (!spendWork(call.loc()))
    return Val::error();
  LayerInstance &instance = instances.emplace_back();
  instance.def = &def;
  instance.typeName = def.name;
  const std::string &prefix = frame().self ? frame().self->path : "";
  instance.path = prefix.empty() ? name : prefix + "." + name;

  LayerInstance scratch;
  if (!bindHyperParams(def, scratch, &call))
    return Val::error();
  instance.members.vars = std::move(scratch.members.vars);

  frames.push_back({&instance, Mode::Body, &instance.members, call.loc()});
  // Defaults that were not given are evaluated in the new instance.
  unsigned errorsBefore = diags.errorCount();
  if (bindHyperParams(def, instance, nullptr) && !containsItself(instance))
    execBlock(def.body);
  frames.pop_back();
  // A layer whose body failed is unusable: calling it would only repeat the
  // same mistake in other words.
  if (diags.errorCount() != errorsBefore)
    return Val::error();
  return Val::ofLayer(&instance);
}

Val Sema::constructRepeat(const RepeatExpr &repeat, const std::string &name) {
  Val countVal = eval(*repeat.count);
  auto end = asInt(countVal, repeat.count->getRange(),
                   repeat.start ? "the range's end" : "the repeat count");
  std::optional<int64_t> first = 0;
  if (repeat.start)
    first = asInt(eval(*repeat.start), repeat.start->getRange(),
                  "the range's start");
  if (!end || !first)
    return Val::error();
  std::optional<int64_t> count = *end - *first;
  if (*count < 1 || *count > kMaxRepeat)
    return error(repeat.count->loc(),
                 "the repeat count must be between 1 and " +
                     std::to_string(kMaxRepeat) + ", not " +
                     std::to_string(*count),
                 {repeat.count->getRange()});
  auto *ctor = dyn_cast<CallExpr>(repeat.body.get());
  if (!ctor)
    return error(repeat.body->loc(),
                 "the body of 'repeat' must create a layer, as in "
                 "'repeat 4 { Block(dim) }'",
                 {repeat.body->getRange()});
  LayerInstance &sequence = beginSequence(name);
  Scope &scope = *frame().scope;
  for (int64_t i = 0; i < *count && !tooLarge; ++i) {
    // Children are numbered from 0, as nn.Sequential's; the index the body
    // sees runs over the range.
    std::string index = std::to_string(i);
    if (repeat.start)
      scope.vars[repeat.indexName] = Val::ofInt(*first + i);
    pendingName = &index;
    Val child = eval(*ctor);
    pendingName = nullptr;
    if (child.kind != Val::Kind::Layer) {
      if (!child.isError())
        error(ctor->loc(),
              "the body of 'repeat' must create a layer, not " +
                  describe(child),
              {ctor->getRange()});
      frames.pop_back();
      return Val::error();
    }
    sequence.sequence.push_back(child.layer);
  }
  frames.pop_back();
  sequence.typeName = "repeat " + std::to_string(*count) + " x " +
                      sequence.sequence.front()->typeName;
  return Val::ofLayer(&sequence);
}

LayerInstance &Sema::beginSequence(const std::string &name) {
  LayerInstance &sequence = instances.emplace_back();
  const std::string &prefix = frame().self ? frame().self->path : "";
  sequence.path = prefix.empty() ? name : prefix + "." + name;
  // Children are named name.0, name.1, ...: their paths hang off the
  // sequence, so they are constructed with the sequence as the enclosing
  // layer, in a scope of its own.
  Scope &scope = scopes.emplace_back();
  scope.parent = frame().scope;
  frames.push_back({&sequence, Mode::Body, &scope, SMLoc()});
  return sequence;
}

bool Sema::createsLayers(const ListExpr &list) {
  if (list.elements.empty())
    return false;
  const Module *from =
      frame().self && frame().self->def ? frame().self->def->module : nullptr;
  for (const ExprPtr &element : list.elements) {
    auto *call = dyn_cast<CallExpr>(element.get());
    auto *callee = call ? dyn_cast<NameExpr>(call->callee.get()) : nullptr;
    const Definition *def = callee && !frame().scope->lookup(callee->name)
                                ? program.find(callee->name, from)
                                : nullptr;
    if (!def || def->isModel)
      return false;
  }
  return true;
}

Val Sema::constructSequence(const ListExpr &list, const std::string &name) {
  // As nn.Sequential: the layers named name.0, name.1, ..., applied in
  // order.
  LayerInstance &sequence = beginSequence(name);
  std::string types;
  for (size_t i = 0; i < list.elements.size() && !tooLarge; ++i) {
    std::string index = std::to_string(i);
    pendingName = &index;
    Val child = eval(*list.elements[i]);
    pendingName = nullptr;
    if (child.kind != Val::Kind::Layer) {
      frames.pop_back();
      return Val::error();
    }
    sequence.sequence.push_back(child.layer);
    types += (i ? ", " : "") + child.layer->typeName;
  }
  frames.pop_back();
  sequence.typeName = "[" + types + "]";
  return Val::ofLayer(&sequence);
}

Val Sema::apply(LayerInstance &layer, const CallExpr &call) {
  std::vector<Val> args;
  std::vector<SMRange> ranges;
  for (const Argument &arg : call.args) {
    if (!arg.name.empty())
      return error(arg.nameLoc, "layer calls take positional arguments only",
                   {SMRange(arg.nameLoc, arg.value->getRange().End)});
    args.push_back(eval(*arg.value));
    ranges.push_back(arg.value->getRange());
    if (args.back().isError())
      return Val::error();
  }
  return applyWith(layer, std::move(args), ranges, call.loc());
}

Val Sema::applyWith(LayerInstance &layer, std::vector<Val> args,
                    const std::vector<SMRange> &ranges, SMLoc loc) {
  if (frames.size() >= kMaxDepth) {
    reportNestingLimit(loc, SMRange(),
                       "calling '" + abbreviatePath(layer.path) + "' (" +
                           layer.typeName + ")");
    return Val::error();
  }
  if (!layer.def) {
    // A sequence: each layer's output is the next one's input. A layer
    // that returns k values (a tuple) hands them to the next as its first
    // k arguments; the arguments after them (a mask) reach every layer
    // unchanged.
    Val value;
    for (LayerInstance *child : layer.sequence) {
      value = applyWith(*child, args, ranges, loc);
      if (value.isError())
        return value;
      std::vector<Val> threaded =
          value.kind == Val::Kind::List ? value.list : std::vector<Val>{value};
      if (threaded.size() > args.size())
        return error(
            loc, "'" + abbreviatePath(child->path) + "' (" + child->typeName +
                     ") returns " + std::to_string(threaded.size()) +
                     " values, more than the " + std::to_string(args.size()) +
                     " arguments its sequence passes on");
      std::copy(threaded.begin(), threaded.end(), args.begin());
    }
    return value;
  }
  if (!layer.forward)
    return error(loc, "layer '" + layer.path + "' (" + layer.typeName +
                          ") has no forward");
  const ForwardStmt &fwd = *layer.forward;
  if (fwd.params.size() != args.size()) {
    error(loc, "the forward of " + layer.typeName + " takes " +
                   std::to_string(fwd.params.size()) + " argument" +
                   (fwd.params.size() == 1 ? "" : "s") + ", not " +
                   std::to_string(args.size()));
    diags.note(fwd.loc(), "the forward is defined here");
    return Val::error();
  }
  Scope &locals = scopes.emplace_back();
  locals.parent = &layer.members;
  for (size_t i = 0; i < args.size(); ++i)
    locals.vars[fwd.params[i].first] = args[i];
  frames.push_back({&layer, Mode::Forward, &locals, loc});
  returned.reset();
  execBlock(fwd.body);
  std::optional<Val> result = std::move(returned);
  returned.reset();
  frames.pop_back();
  if (!result)
    return error(fwd.loc(), "the forward of " + layer.typeName +
                                " does not return a value");
  return *result;
}

std::optional<TensorType> Sema::evalType(const TypeSpec &spec) {
  std::optional<ElementType> dtype = parseElementType(spec.dtype);
  if (!dtype)
    return error(spec.dtypeRange.Start,
                 "unknown element type '" + spec.dtype +
                     "'; use f32, f16, bf16, i32 or i8",
                 {spec.dtypeRange});
  TensorType type{*dtype, {}};
  for (const ExprPtr &dim : spec.dims) {
    auto d = asInt(eval(*dim), dim->getRange(), "a dimension");
    if (!d)
      return std::nullopt;
    if (*d < 1)
      return error(dim->loc(),
                   "dimensions must be positive, not " + std::to_string(*d),
                   {dim->getRange()});
    type.shape.push_back(*d);
  }
  if (!shape::numElements(type.shape))
    return error(spec.range.Start,
                 "the tensor " + type.str() + " has too many elements",
                 {spec.range});
  return type;
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

void Sema::execBlock(const Block &block) {
  for (const StmtPtr &stmt : block) {
    if (returned || tooLarge)
      return;
    execStmt(*stmt);
  }
}

void Sema::execStmt(const Stmt &stmt) {
  Mode mode = frame().mode;
  bool isModel =
      frame().self && frame().self->path.empty() && mode == Mode::Body;
  switch (stmt.getKind()) {
  case Stmt::Kind::Let:
  case Stmt::Kind::Assign:
    return execBind(cast<BindStmt>(stmt));
  case Stmt::Kind::Expr:
    eval(*cast<ExprStmt>(stmt).value);
    return;
  case Stmt::Kind::Return: {
    auto &ret = cast<ReturnStmt>(stmt);
    if (mode != Mode::Forward) {
      error(stmt.loc(), "'return' belongs in a forward");
      return;
    }
    returned = eval(*ret.value);
    return;
  }
  case Stmt::Kind::If: {
    auto &ifStmt = cast<IfStmt>(stmt);
    auto cond = asBool(eval(*ifStmt.cond), ifStmt.cond->getRange(),
                       "an 'if' condition (decided at compile time)");
    if (!cond)
      return;
    execBlock(*cond ? ifStmt.thenBlock : ifStmt.elseBlock);
    return;
  }
  case Stmt::Kind::For:
    return execFor(cast<ForStmt>(stmt));
  case Stmt::Kind::Checkpoint: {
    if (mode != Mode::Forward) {
      error(stmt.loc(), "'checkpoint' belongs in a forward");
      return;
    }
    // Nested blocks recompute with the outermost one.
    int outer = checkpointBlock;
    if (outer < 0)
      checkpointBlock = checkpointBlocks++;
    execBlock(cast<CheckpointStmt>(stmt).body);
    checkpointBlock = outer;
    return;
  }
  case Stmt::Kind::Param:
    if (mode != Mode::Body) {
      error(stmt.loc(), cast<ParamStmt>(stmt).isBuffer
                            ? "buffers are declared in the layer body, not "
                              "in a forward"
                            : "parameters are declared in the layer body, "
                              "not in a forward");
      return;
    }
    return execParam(cast<ParamStmt>(stmt));
  case Stmt::Kind::Data:
    if (!isModel) {
      error(stmt.loc(), "'input' and 'target' are declared in a model body");
      return;
    }
    return execData(cast<DataStmt>(stmt));
  case Stmt::Kind::Forward: {
    auto &fwd = cast<ForwardStmt>(stmt);
    if (mode != Mode::Body) {
      error(stmt.loc(), "a forward cannot be nested in a forward");
      return;
    }
    LayerInstance &self = *frame().self;
    const ForwardStmt *&slot = isModel ? modelForward : self.forward;
    if (slot) {
      error(stmt.loc(), "'" + self.typeName + "' has two forwards");
      diags.note(slot->loc(), "the first forward is here");
      return;
    }
    if (isModel && !fwd.params.empty()) {
      error(fwd.params.front().second.Start,
            "a model's forward takes no arguments; declare them with 'input'",
            {fwd.params.front().second});
      return;
    }
    slot = &fwd;
    return;
  }
  case Stmt::Kind::Train:
    if (!isModel) {
      error(stmt.loc(), "a 'train' section belongs in a model body");
      return;
    }
    if (trainStmt) {
      error(stmt.loc(), "the model has two 'train' sections");
      diags.note(trainStmt->loc(), "the first is here");
      return;
    }
    trainStmt = &cast<TrainStmt>(stmt);
    return;
  case Stmt::Kind::Directive:
    error(stmt.loc(), "'prune' and 'quantize' belong in the train section");
    return;
  }
}

Sema::BindTarget Sema::bindTarget(bool isLet, const std::string &name,
                                  SMRange nameRange) {
  Scope &scope = *frame().scope;
  BindTarget target;
  if (isLet) {
    if (scope.vars.count(name)) {
      if (bodyLoops > 0)
        error(nameRange.Start,
              "'" + name +
                  "' is already defined in this layer: what a 'for' in a "
                  "layer body declares are the layer's members, so each "
                  "pass's needs the index in its name ('" +
                  name + "_{i}')",
              {nameRange});
      else
        error(nameRange.Start,
              "'" + name + "' is already defined here; use '" + name +
                  " = ...' to rebind it",
              {nameRange});
      target.kind = BindTarget::Invalid;
    }
    return target;
  }
  // Rebinding never reaches into a layer's members from its forward.
  Scope *stop = frame().mode == Mode::Forward && frame().self
                    ? &frame().self->members
                    : nullptr;
  for (Scope *s = &scope; s && s != stop; s = s->parent) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) {
      target.kind = BindTarget::Existing;
      target.existing = &it->second;
      return target;
    }
  }
  if (stop && frame().self->buffers.count(name)) {
    // A buffer's new value: read by what follows, and written back by the
    // training step.
    target.kind = BindTarget::Buffer;
    target.existing = &stop->vars[name];
    return target;
  }
  target.kind = BindTarget::Invalid;
  if (stop && stop->vars.count(name)) {
    // A member is fixed when the layer is created: a forward that changed
    // it would make the layer's next call compute something else.
    error(nameRange.Start,
          "'" + name + "' is a member of " +
              (frame().self->def && frame().self->def->isModel ? "model '"
                                                               : "layer '") +
              frame().self->typeName +
              "', and a forward cannot rebind its layer's members; use 'let " +
              name +
              " = ...' for a value of this forward, or declare state that a "
              "forward updates as 'buffer " +
              name + ": TYPE = INIT'",
          {nameRange});
    return target;
  }
  error(nameRange.Start,
        "'" + name + "' is not defined; declare it with 'let " + name +
            " = ...'",
        {nameRange});
  target.undefined = true;
  return target;
}

void Sema::storeBinding(const BindTarget &target, const std::string &name,
                        const Val &value, const Expr &valueExpr) {
  if (target.kind == BindTarget::Buffer && !value.isError()) {
    const TensorType &type = typeOf(frame().self->buffers[name]);
    if (!value.isTensor() || typeOf(value.tensor) != type) {
      error(valueExpr.loc(),
            "buffer '" + name + "' is " + type.str() +
                ", and its new value must be too, not " + describe(value),
            {valueExpr.getRange()});
      return;
    }
  }
  if (target.kind == BindTarget::Buffer && value.isError())
    return;
  if (target.existing)
    *target.existing = value;
  else
    frame().scope->vars[name] = value;
}

void Sema::execBind(const BindStmt &bind) {
  bool isLet = bind.getKind() == Stmt::Kind::Let;
  if (!bind.moreNames.empty())
    return execTupleBind(bind, isLet);
  std::string name = expandName(bind.name, bind.nameRange);
  if (name.empty()) {
    eval(*bind.value);
    return;
  }
  BindTarget target = bindTarget(isLet, name, bind.nameRange);
  if (target.kind == BindTarget::Invalid) {
    if (target.undefined)
      eval(*bind.value); // its own mistakes are reported too
    return;
  }
  Val value;
  auto *list = dyn_cast<ListExpr>(bind.value.get());
  if (auto *repeat = dyn_cast<RepeatExpr>(bind.value.get())) {
    if (frame().mode != Mode::Body)
      value = eval(*repeat); // diagnoses the misuse
    else
      value = constructRepeat(*repeat, name);
  } else if (list && frame().mode == Mode::Body && createsLayers(*list)) {
    value = constructSequence(*list, name);
  } else {
    pendingName = isa<CallExpr>(bind.value.get()) ? &name : nullptr;
    value = eval(*bind.value);
    pendingName = nullptr;
  }
  storeBinding(target, name, value, *bind.value);
}

void Sema::execTupleBind(const BindStmt &bind, bool isLet) {
  // let a, b = f(...): the value is a tuple (a list) of as many values.
  std::vector<std::pair<std::string, SMRange>> names{
      {bind.name, bind.nameRange}};
  names.insert(names.end(), bind.moreNames.begin(), bind.moreNames.end());
  std::vector<BindTarget> targets;
  bool ok = true;
  for (const auto &[name, range] : names) {
    targets.push_back(bindTarget(isLet, name, range));
    ok = ok && targets.back().kind != BindTarget::Invalid;
    for (size_t k = 0; isLet && k + 1 < targets.size(); ++k)
      if (names[k].first == name) {
        error(range.Start, "'" + name + "' is bound twice here", {range});
        ok = false;
      }
  }
  Val value = eval(*bind.value);
  if (!ok || value.isError())
    return;
  if (value.kind != Val::Kind::List || value.list.size() != names.size()) {
    error(bind.value->loc(),
          "cannot bind " + std::to_string(names.size()) + " names to " +
              (value.kind == Val::Kind::List
                   ? std::to_string(value.list.size()) + " values"
                   : describe(value) +
                         "; a forward returns several values as 'return a, "
                         "b'"),
          {bind.value->getRange()});
    return;
  }
  for (size_t k = 0; k < names.size(); ++k)
    storeBinding(targets[k], names[k].first, value.list[k], *bind.value);
}

void Sema::execFor(const ForStmt &loop) {
  auto first = asInt(eval(*loop.start), loop.start->getRange(),
                     "the start of a 'for' range");
  auto last =
      asInt(eval(*loop.end), loop.end->getRange(), "the end of a 'for' range");
  if (!first || !last)
    return;
  if (*last - *first > kMaxRepeat) {
    error(loop.loc(),
          "a 'for' loop runs at most " + std::to_string(kMaxRepeat) +
              " times (it is unrolled at compile time), not " +
              std::to_string(*last - *first),
          {SMRange(loop.start->getRange().Start, loop.end->getRange().End)});
    return;
  }
  Scope *outer = frame().scope;
  bool inBody = frame().mode == Mode::Body;
  if (inBody && outer->vars.count(loop.indexName)) {
    error(loop.indexRange.Start,
          "'" + loop.indexName + "' is already defined in this layer",
          {loop.indexRange});
    return;
  }
  for (int64_t i = *first; i < *last && !returned && !tooLarge; ++i) {
    if (!spendWork(loop.loc()))
      return;
    if (inBody) {
      // What the block declares are the layer's members; only the index
      // is the loop's.
      outer->vars[loop.indexName] = Val::ofInt(i);
      ++bodyLoops;
      execBlock(loop.body);
      --bodyLoops;
      outer->vars.erase(loop.indexName);
      continue;
    }
    Scope &scope = scopes.emplace_back();
    scope.parent = outer;
    scope.vars[loop.indexName] = Val::ofInt(i);
    frame().scope = &scope;
    execBlock(loop.body);
    frame().scope = outer;
  }
}

void Sema::execParam(const ParamStmt &param) {
  std::string name = expandName(param.name, param.nameRange);
  if (name.empty())
    return;
  LayerInstance &self = *frame().self;
  Scope &scope = *frame().scope;
  if (!spendWork(param.loc()))
    return;
  if (scope.vars.count(name)) {
    error(param.nameRange.Start,
          "'" + name + "' is already defined in this layer", {param.nameRange});
    return;
  }
  std::optional<TensorType> type = evalType(param.type);
  if (!type) {
    scope.vars[name] = Val::error();
    return;
  }
  if (!param.isBuffer && !isFloat(type->dtype)) {
    error(param.type.dtypeRange.Start,
          "parameters must have a floating-point type, not " + type->str(),
          {param.type.dtypeRange});
    scope.vars[name] = Val::error();
    return;
  }
  if (!param.init) {
    error(param.nameRange.Start,
          param.isBuffer
              ? "buffer '" + name + "' needs an initializer, such as '= zeros'"
              : "parameter '" + name +
                    "' needs an initializer, such as '= "
                    "normal(std=0.02)'",
          {param.nameRange});
    scope.vars[name] = Val::error();
    return;
  }
  extern const SettingFamily &initializerFamily();
  std::optional<ConfigValue> init =
      evalSetting(*param.init, initializerFamily());
  if (!init) {
    scope.vars[name] = Val::error();
    return;
  }
  GraphArg arg;
  arg.name = self.path.empty() ? name : self.path + "." + name;
  arg.role = param.isBuffer ? ArgRole::Buffer : ArgRole::Param;
  arg.value = graph.addValue(*type);
  arg.init = *init;
  arg.pos = position(param.loc());
  graph.args.push_back(arg);
  scope.vars[name] = Val::ofTensor(arg.value);
  if (param.isBuffer) {
    self.buffers[name] = arg.value;
    bufferMembers.push_back({&self, name, arg.value});
  }
}

void Sema::execData(const DataStmt &data) {
  Scope &scope = *frame().scope;
  if (scope.vars.count(data.name)) {
    error(data.nameRange.Start, "'" + data.name + "' is already defined",
          {data.nameRange});
    return;
  }
  std::optional<TensorType> type = evalType(data.type);
  if (!type) {
    scope.vars[data.name] = Val::error();
    return;
  }
  GraphArg arg;
  arg.name = data.name;
  arg.role = data.isTarget ? ArgRole::Target : ArgRole::Input;
  arg.value = graph.addValue(*type);
  arg.pos = position(data.loc());
  graph.args.push_back(arg);
  scope.vars[data.name] = Val::ofTensor(arg.value);
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

std::optional<Graph> Sema::run(const ElaborateOptions &options) {
  const Definition *model = nullptr;
  std::vector<const Definition *> models = program.mainModels();
  if (!options.modelName.empty()) {
    auto it = program.definitions.find(options.modelName);
    if (it == program.definitions.end() || !it->second->isModel) {
      diags.error("there is no model named '" + options.modelName + "'");
      return std::nullopt;
    }
    model = it->second;
  } else if (models.size() == 1) {
    model = models.front();
  } else if (models.empty()) {
    diags.error("'" + program.mainModule().fileName +
                "' defines no model (write 'model Name(...) { ... }')");
    return std::nullopt;
  } else {
    std::string names;
    for (const Definition *m : models)
      names += (names.empty() ? "" : ", ") + m->name;
    diags.error("'" + program.mainModule().fileName +
                "' defines several models (" + names +
                "); choose one with --model");
    return std::nullopt;
  }

  for (const auto &[name, value] : options.overrides)
    overrides[name] = value;
  graph.modelName = model->name;
  graph.fileName = program.mainModule().fileName;

  LayerInstance &root = instances.emplace_back();
  root.def = model;
  root.typeName = model->name;
  frames.push_back({&root, Mode::Body, &root.members, SMLoc()});
  bool ok = bindHyperParams(*model, root, nullptr);
  for (const auto &[name, value] : overrides) {
    std::string known;
    for (const HyperParam &hp : model->hyperParams)
      known += (known.empty() ? "" : ", ") + hp.name;
    diags.error("-D " + name + ": model '" + model->name +
                "' has no hyper-parameter '" + name +
                "' (it has: " + (known.empty() ? "none" : known) + ")");
    ok = false;
  }
  if (!ok)
    return std::nullopt;
  for (const HyperParam &hp : model->hyperParams) {
    const Val &v = root.members.vars[hp.name];
    ConfigValue c = v.kind == Val::Kind::Int     ? ConfigValue::ofInt(v.i)
                    : v.kind == Val::Kind::Float ? ConfigValue::ofFloat(v.f)
                    : v.kind == Val::Kind::Bool  ? ConfigValue::ofBool(v.b)
                    : v.kind == Val::Kind::ElementType
                        ? ConfigValue::ofSymbol(spell(v.dtype))
                        : ConfigValue::ofSymbol(v.s);
    graph.hyperParams.push_back({hp.name, c});
  }

  execBlock(model->body);
  frames.pop_back();

  if (!modelForward)
    return error(model->nameRange.Start,
                 "model '" + model->name + "' has no forward",
                 {model->nameRange});
  // Go on after errors in the body: values that failed are Error values,
  // which silence everything computed from them, so only independent
  // mistakes in the forward and the train section are reported.

  Scope &locals = scopes.emplace_back();
  std::optional<Val> output = runModelForward(root, locals);
  int outputValue = output && output->isTensor() ? output->tensor : -1;
  if (!output)
    error(modelForward->loc(), "the model's forward does not return a value");
  else if (!output->isError() && !output->isTensor())
    error(modelForward->loc(),
          "the model's forward must return a tensor, not " + describe(*output));

  // Inputs, then targets, then parameters; each group in declaration order.
  std::stable_sort(graph.args.begin(), graph.args.end(),
                   [](const GraphArg &a, const GraphArg &b) {
                     return int(a.role) < int(b.role);
                   });

  if (trainStmt) {
    // Checked even when the forward failed, to report every mistake at once.
    frames.push_back({&root, Mode::Train, &locals, SMLoc()});
    evalTrain(*trainStmt, outputValue, options.directives);
    frames.pop_back();
  } else if (!options.directives.empty()) {
    diags.error("--prune and --quantize need a train section, and model '" +
                model->name + "' has none");
  } else if (outputValue >= 0) {
    graph.outputs.push_back(outputValue);
    graph.outputNames.push_back("output");
  }
  if (outputValue < 0)
    return std::nullopt;
  if (diags.hadError())
    return std::nullopt;

  // What the training forward left in the buffers it updated; then each
  // buffer is back to its value at the step's start.
  for (BufferMember &buffer : bufferMembers) {
    Val &value = buffer.layer->members.vars[buffer.name];
    if (value.isTensor() && value.tensor != buffer.value)
      graph.bufferUpdates.push_back({buffer.value, value.tensor});
    value = Val::ofTensor(buffer.value);
  }
  if (modeDependent && !elaborateEvaluation(root, outputValue))
    return std::nullopt;
  return std::move(graph);
}

std::optional<Val> Sema::runModelForward(LayerInstance &root, Scope &locals) {
  locals.parent = &root.members;
  frames.push_back({&root, Mode::Forward, &locals, SMLoc()});
  execBlock(modelForward->body);
  frames.pop_back();
  std::optional<Val> output = std::move(returned);
  returned.reset();
  return output;
}

bool Sema::elaborateEvaluation(LayerInstance &root, int trainingOutput) {
  // The forward once more, with `training` false: its ops join the graph,
  // its output (and loss) become the eval_ results. Buffer updates in it
  // are dropped: evaluation never changes the model's state.
  training = false;
  Scope &locals = scopes.emplace_back();
  std::optional<Val> output = runModelForward(root, locals);
  for (BufferMember &buffer : bufferMembers)
    buffer.layer->members.vars[buffer.name] = Val::ofTensor(buffer.value);
  if (diags.hadError())
    return false;
  if (!output || !output->isTensor() ||
      typeOf(output->tensor) != typeOf(trainingOutput)) {
    error(modelForward->loc(),
          "in evaluation ('training' false) the model's forward must return " +
              typeOf(trainingOutput).str() + ", as in training, not " +
              (output ? describe(*output) : std::string("nothing")));
    return false;
  }
  graph.outputs.push_back(output->tensor);
  graph.outputNames.push_back("eval_output");
  if (!trainStmt)
    return true;
  for (const StmtPtr &stmt : trainStmt->settings) {
    auto *bind = llvm::dyn_cast<BindStmt>(stmt.get());
    if (!bind || bind->name != "loss")
      continue;
    locals.vars["output"] = *output;
    frames.push_back({&root, Mode::Train, &locals, SMLoc()});
    std::optional<int> loss = evalLoss(*bind->value, output->tensor);
    frames.pop_back();
    if (!loss)
      return false;
    graph.outputs.push_back(*loss);
    graph.outputNames.push_back("eval_loss");
  }
  return true;
}
