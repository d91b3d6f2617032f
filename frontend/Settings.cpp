//===- Settings.cpp - The train section and parameter initializers --------===//
//
// Settings are compile-time calls such as `adamw(lr=3e-4)` or
// `normal(std=0.02)`. Each family lists its functions with typed, defaulted
// parameters; validation fills in every default, so later stages read one
// complete, checked ConfigValue and never guess.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaInternal.h"

#include "llvm/Support/Casting.h"

#include <cmath>

using namespace mnemo;
using namespace mnemo::sema;
using llvm::SMRange;
using llvm::Twine;

namespace mnemo::sema {

enum class ParamType {
  Number,
  Positive,    // > 0
  NonNegative, // >= 0
  Fraction,    // [0, 1)
  Int,         // any integer
  PositiveInt, // >= 1
  NonNegativeInt,
  Bool,
  Enum,  // one of `options`
  Betas, // two numbers in [0, 1)
  Bits,  // 4 or 8
};

struct SettingParam {
  const char *name;
  ParamType type;
  bool required = false;
  double number = 0;            // default of numeric and Bool parameters
  const char *symbol = nullptr; // default of Enum parameters
  std::vector<const char *> options = {};
};

struct SettingFunction {
  const char *name;
  std::vector<const char *> aliases;
  std::vector<SettingParam> params;
};

struct SettingFamily {
  const char *what;
  std::vector<SettingFunction> functions;
};

} // namespace mnemo::sema

namespace {
SettingParam required(const char *name, ParamType type) {
  return {name, type, /*required=*/true};
}
SettingParam optional(const char *name, ParamType type, double dflt) {
  return {name, type, /*required=*/false, dflt};
}
SettingParam choice(const char *name, std::vector<const char *> options,
                    const char *dflt) {
  return {name, ParamType::Enum,   /*required=*/false, 0,
          dflt, std::move(options)};
}
/// Which parameters weight decay applies to: "all" (one parameter group, as
/// torch.optim with model.parameters()), or "matrices", the parameters of
/// two or more dimensions (the weights of linear, embedding and convolution
/// layers), so that biases and normalization scales do not decay: nanoGPT's
/// two groups, and most recipes'.
SettingParam decayParams() {
  return choice("decay_params", {"all", "matrices"}, "all");
}
SettingParam betas() { return {"betas", ParamType::Betas}; }

/// Gradual pruning follows Zhu & Gupta: sparsity ramps up cubically from
/// `start` to `end`, updated every `every` steps; end = 0 means one-shot.
std::vector<SettingParam> withGradual(std::vector<SettingParam> params) {
  params.push_back(optional("start", ParamType::NonNegativeInt, 0));
  params.push_back(optional("end", ParamType::NonNegativeInt, 0));
  params.push_back(optional("every", ParamType::PositiveInt, 100));
  return params;
}

const std::vector<const char *> kNonlinearities = {"leaky_relu", "relu",
                                                   "linear", "tanh", "sigmoid"};
} // namespace

namespace mnemo::sema {

const SettingFamily &initializerFamily() {
  static const SettingFamily family{
      "initializer",
      {
          {"zeros", {}, {}},
          {"ones", {}, {}},
          {"constant", {}, {required("value", ParamType::Number)}},
          {"normal",
           {},
           {optional("std", ParamType::Positive, 1.0),
            optional("mean", ParamType::Number, 0.0)}},
          {"uniform",
           {},
           {optional("low", ParamType::Number, 0.0),
            optional("high", ParamType::Number, 1.0)}},
          // torch.nn.init.trunc_normal_: a normal(mean, std) limited to
          // [a, b] (bounds in the tensor's units, not in standard
          // deviations, as PyTorch's).
          {"trunc_normal",
           {},
           {optional("std", ParamType::Positive, 1.0),
            optional("mean", ParamType::Number, 0.0),
            optional("a", ParamType::Number, -2.0),
            optional("b", ParamType::Number, 2.0)}},
          {"xavier_uniform",
           {"glorot", "glorot_uniform", "xavier"},
           {optional("gain", ParamType::Positive, 1.0)}},
          {"xavier_normal",
           {"glorot_normal"},
           {optional("gain", ParamType::Positive, 1.0)}},
          {"kaiming_uniform",
           {"kaiming", "he", "he_uniform"},
           {optional("a", ParamType::NonNegative, 0.0),
            choice("mode", {"fan_in", "fan_out"}, "fan_in"),
            choice("nonlinearity", kNonlinearities, "leaky_relu")}},
          {"kaiming_normal",
           {"he_normal"},
           {optional("a", ParamType::NonNegative, 0.0),
            choice("mode", {"fan_in", "fan_out"}, "fan_in"),
            choice("nonlinearity", kNonlinearities, "leaky_relu")}},
      }};
  return family;
}

static const SettingFamily &optimizerFamily() {
  static const SettingFamily family{
      "optimizer",
      {
          {"sgd",
           {},
           {required("lr", ParamType::Positive),
            optional("momentum", ParamType::NonNegative, 0),
            optional("dampening", ParamType::NonNegative, 0),
            optional("weight_decay", ParamType::NonNegative, 0), decayParams(),
            optional("nesterov", ParamType::Bool, 0)}},
          {"adam",
           {},
           {optional("lr", ParamType::Positive, 1e-3), betas(),
            optional("eps", ParamType::Positive, 1e-8),
            optional("weight_decay", ParamType::NonNegative, 0),
            decayParams()}},
          {"adamw",
           {},
           {optional("lr", ParamType::Positive, 1e-3), betas(),
            optional("eps", ParamType::Positive, 1e-8),
            optional("weight_decay", ParamType::NonNegative, 0.01),
            decayParams()}},
          {"adamw8bit",
           {},
           {optional("lr", ParamType::Positive, 1e-3), betas(),
            optional("eps", ParamType::Positive, 1e-8),
            optional("weight_decay", ParamType::NonNegative, 0.01),
            decayParams(), optional("block", ParamType::PositiveInt, 2048)}},
      }};
  return family;
}

static const SettingFamily &scheduleFamily() {
  static const SettingFamily family{
      "learning-rate schedule",
      {
          {"constant", {}, {optional("warmup", ParamType::NonNegativeInt, 0)}},
          {"linear_warmup",
           {"warmup"},
           {required("warmup", ParamType::PositiveInt)}},
          {"cosine",
           {},
           {optional("warmup", ParamType::NonNegativeInt, 0),
            optional("steps", ParamType::NonNegativeInt, 0),
            optional("min_lr", ParamType::NonNegative, 0)}},
      }};
  return family;
}

static const SettingFamily &pruningFamily() {
  static const SettingFamily family{
      "pruning method",
      {
          {"magnitude",
           {"unstructured"},
           withGradual({required("sparsity", ParamType::Fraction),
                        choice("scope", {"layer", "global"}, "layer")})},
          {"structured",
           {"channels", "rows"},
           withGradual({required("sparsity", ParamType::Fraction),
                        choice("norm", {"l1", "l2"}, "l2"),
                        optional("dim", ParamType::NonNegativeInt, 0)})},
          {"nm",
           {"semi_structured"},
           withGradual({optional("n", ParamType::PositiveInt, 2),
                        optional("m", ParamType::PositiveInt, 4)})},
      }};
  return family;
}

static const SettingFamily &quantizationFamily() {
  static const SettingFamily family{
      "quantization scheme",
      {
          {"qat",
           {"fake_quant"},
           {optional("bits", ParamType::Bits, 8),
            choice("granularity", {"per_tensor", "per_channel"}, "per_channel"),
            choice("scheme", {"symmetric", "affine"}, "symmetric"),
            choice("observer", {"minmax", "moving_average"}, "minmax")}},
          {"int8",
           {},
           {choice("granularity", {"per_channel", "per_group"}, "per_channel"),
            optional("group", ParamType::PositiveInt, 128)}},
          {"int4",
           {},
           {choice("granularity", {"per_group", "per_channel"}, "per_group"),
            optional("group", ParamType::PositiveInt, 128)}},
      }};
  return family;
}

} // namespace mnemo::sema

static std::string unknownMessage(const std::string &what,
                                  const std::string &name,
                                  const std::vector<std::string> &known) {
  std::string best = closestMatch(name, known);
  std::string list;
  for (const std::string &k : known)
    list += (list.empty() ? "" : ", ") + k;
  return "unknown " + what + " '" + name + "'" +
         (best.empty() ? "" : "; did you mean '" + best + "'?") +
         " (known: " + list + ")";
}

std::optional<ConfigValue> Sema::evalSettingValue(const Expr &expr) {
  if (auto *name = llvm::dyn_cast<NameExpr>(&expr)) {
    if (!frames.empty())
      if (Val *v = frame().scope->lookup(name->name)) {
        if (v->isError())
          return std::nullopt;
        if (v->kind == Val::Kind::Int)
          return ConfigValue::ofInt(v->i);
        if (v->kind == Val::Kind::Float)
          return ConfigValue::ofFloat(v->f);
        if (v->kind == Val::Kind::Bool)
          return ConfigValue::ofBool(v->b);
        if (v->kind == Val::Kind::ElementType)
          return ConfigValue::ofSymbol(spell(v->dtype));
      }
    return ConfigValue::ofSymbol(name->name);
  }
  if (auto *list = llvm::dyn_cast<ListExpr>(&expr)) {
    ConfigValue out;
    out.kind = ConfigValue::Kind::List;
    for (const ExprPtr &e : list->elements) {
      auto v = evalSettingValue(*e);
      if (!v)
        return std::nullopt;
      out.list.push_back(*v);
    }
    return out;
  }
  Val v = eval(expr);
  switch (v.kind) {
  case Val::Kind::Error:
    return std::nullopt;
  case Val::Kind::Int:
  case Val::Kind::Size:
    return ConfigValue::ofInt(v.i);
  case Val::Kind::Float:
    return ConfigValue::ofFloat(v.f);
  case Val::Kind::Bool:
    return ConfigValue::ofBool(v.b);
  case Val::Kind::String:
    return ConfigValue::ofString(v.s);
  case Val::Kind::ElementType:
    return ConfigValue::ofSymbol(spell(v.dtype));
  default:
    return error(expr.loc(),
                 "a setting must be a number, a name or a list, not " +
                     describe(v),
                 {expr.getRange()});
  }
}

/// Checks `value` against `param`; on success returns the normalized value.
static std::optional<ConfigValue> checkParam(const SettingParam &param,
                                             const ConfigValue &value,
                                             std::string &why) {
  bool isNumber = value.kind == ConfigValue::Kind::Int ||
                  value.kind == ConfigValue::Kind::Float;
  double x = value.number();
  bool isInt = value.kind == ConfigValue::Kind::Int;
  auto reject = [&](std::string reason) {
    why = std::move(reason);
    return std::nullopt;
  };
  switch (param.type) {
  case ParamType::Number:
  case ParamType::Positive:
  case ParamType::NonNegative:
  case ParamType::Fraction:
    if (!isNumber || std::isnan(x))
      return reject("must be a number");
    if (param.type == ParamType::Positive && !(x > 0))
      return reject("must be positive");
    if (param.type == ParamType::NonNegative && !(x >= 0))
      return reject("must not be negative");
    if (param.type == ParamType::Fraction && !(x >= 0 && x < 1))
      return reject("must be in [0, 1)");
    return ConfigValue::ofFloat(x);
  case ParamType::Int:
  case ParamType::PositiveInt:
  case ParamType::NonNegativeInt:
  case ParamType::Bits:
    if (!isInt)
      return reject("must be an integer");
    if (param.type == ParamType::PositiveInt && value.intValue < 1)
      return reject("must be at least 1");
    if (param.type == ParamType::NonNegativeInt && value.intValue < 0)
      return reject("must not be negative");
    if (param.type == ParamType::Bits && value.intValue != 4 &&
        value.intValue != 8)
      return reject("must be 4 or 8");
    return value;
  case ParamType::Bool:
    if (value.kind != ConfigValue::Kind::Bool)
      return reject("must be true or false");
    return value;
  case ParamType::Enum: {
    if (value.kind == ConfigValue::Kind::Symbol ||
        value.kind == ConfigValue::Kind::String)
      for (const char *option : param.options)
        if (value.text == option)
          return ConfigValue::ofSymbol(option);
    std::string options;
    for (size_t i = 0; i < param.options.size(); ++i)
      options += std::string(i ? ", " : " ") + param.options[i];
    return reject("must be one of" + options);
  }
  case ParamType::Betas: {
    if (value.kind != ConfigValue::Kind::List || value.list.size() != 2)
      return reject("must be a pair [beta1, beta2]");
    ConfigValue out;
    out.kind = ConfigValue::Kind::List;
    for (const ConfigValue &b : value.list) {
      bool num = b.kind == ConfigValue::Kind::Int ||
                 b.kind == ConfigValue::Kind::Float;
      if (!num || !(b.number() >= 0 && b.number() < 1))
        return reject("must be two numbers in [0, 1)");
      out.list.push_back(ConfigValue::ofFloat(b.number()));
    }
    return out;
  }
  }
  return std::nullopt;
}

static ConfigValue defaultOf(const SettingParam &param) {
  switch (param.type) {
  case ParamType::Enum:
    return ConfigValue::ofSymbol(param.symbol);
  case ParamType::Bool:
    return ConfigValue::ofBool(param.number != 0);
  case ParamType::Int:
  case ParamType::PositiveInt:
  case ParamType::NonNegativeInt:
  case ParamType::Bits:
    return ConfigValue::ofInt(int64_t(param.number));
  case ParamType::Betas: {
    ConfigValue out;
    out.kind = ConfigValue::Kind::List;
    out.list = {ConfigValue::ofFloat(0.9), ConfigValue::ofFloat(0.999)};
    return out;
  }
  default:
    return ConfigValue::ofFloat(param.number);
  }
}

/// The function of `family` called `name` or by an alias `name`, or null.
static const SettingFunction *findFunction(const SettingFamily &family,
                                           llvm::StringRef name) {
  for (const SettingFunction &f : family.functions) {
    if (name == f.name)
      return &f;
    for (const char *alias : f.aliases)
      if (name == alias)
        return &f;
  }
  return nullptr;
}

std::optional<ConfigValue> Sema::evalSetting(const Expr &expr,
                                             const SettingFamily &family) {
  const NameExpr *name = llvm::dyn_cast<NameExpr>(&expr);
  // `param weight: ... = init`, where `init` holds an initializer value (a
  // layer's hyper-parameter, or a `let`).
  const Val *bound =
      name && !frames.empty() ? frame().scope->lookup(name->name) : nullptr;
  if (bound && bound->isError())
    return std::nullopt; // already diagnosed
  if (bound &&
      (bound->kind == Val::Kind::Initializer ||
       bound->kind == Val::Kind::None || !findFunction(family, name->name))) {
    if (bound->kind == Val::Kind::Initializer &&
        &family == &initializerFamily())
      return bound->initializer;
    return error(
        expr.loc(),
        "'" + name->name + "' is " + describe(*bound) + ", where " +
            (llvm::StringRef("aeiou").contains(family.what[0]) ? "an " : "a ") +
            family.what + " such as " + family.functions.front().name +
            "(...) is expected",
        {expr.getRange()});
  }
  const CallExpr *call = llvm::dyn_cast<CallExpr>(&expr);
  if (call)
    name = llvm::dyn_cast<NameExpr>(call->callee.get());
  std::vector<std::string> known;
  for (const SettingFunction &f : family.functions)
    known.push_back(f.name);
  if (!name)
    return error(expr.loc(),
                 std::string("expected ") + family.what + " such as " +
                     known.front() + "(...)",
                 {expr.getRange()});
  const SettingFunction *fn = findFunction(family, name->name);
  if (!fn)
    return error(name->loc(), unknownMessage(family.what, name->name, known),
                 {name->getRange()});

  std::string signature = std::string(fn->name) + "(";
  for (size_t i = 0; i < fn->params.size(); ++i)
    signature += (i ? ", " : "") + std::string(fn->params[i].name);
  signature += ")";

  std::vector<std::optional<ConfigValue>> values(fn->params.size());
  bool ok = true;
  if (call) {
    size_t position = 0;
    for (const Argument &arg : call->args) {
      SMRange range = arg.value->getRange();
      auto value = evalSettingValue(*arg.value);
      if (!value) {
        ok = false;
        continue;
      }
      int slot = -1;
      if (!arg.name.empty()) {
        for (size_t i = 0; i < fn->params.size(); ++i)
          if (arg.name == fn->params[i].name)
            slot = int(i);
        if (slot < 0) {
          std::vector<std::string> names;
          for (const SettingParam &p : fn->params)
            names.push_back(p.name);
          std::string best = closestMatch(arg.name, names);
          error(arg.nameLoc,
                "'" + arg.name + "' is not an argument of " + signature +
                    (best.empty() ? "" : "; did you mean '" + best + "'?"),
                {SMRange(arg.nameLoc, range.End)});
          ok = false;
          continue;
        }
      } else {
        // A bare option such as `per_channel` binds to the parameter that
        // accepts it; other positional values fill parameters in order.
        if (value->kind == ConfigValue::Kind::Symbol)
          for (size_t i = 0; i < fn->params.size() && slot < 0; ++i)
            for (const char *option : fn->params[i].options)
              if (value->text == option && !values[i])
                slot = int(i);
        while (slot < 0 && position < fn->params.size()) {
          if (!values[position])
            slot = int(position);
          ++position;
        }
        if (slot < 0) {
          error(range.Start,
                "too many arguments; the signature is " + signature, {range});
          ok = false;
          continue;
        }
      }
      if (values[slot]) {
        error(range.Start,
              std::string("argument '") + fn->params[slot].name +
                  "' is given twice",
              {range});
        ok = false;
        continue;
      }
      std::string why;
      auto checked = checkParam(fn->params[slot], *value, why);
      if (!checked) {
        error(range.Start,
              std::string("argument '") + fn->params[slot].name + "' of " +
                  fn->name + " " + why + ", not " + value->str(),
              {range});
        ok = false;
        continue;
      }
      values[slot] = *checked;
    }
  }
  std::vector<Setting> args;
  for (size_t i = 0; i < fn->params.size() && ok; ++i) {
    const SettingParam &param = fn->params[i];
    if (!values[i]) {
      if (param.required) {
        error(expr.loc(),
              std::string("missing argument '") + param.name + "' of " +
                  signature,
              {expr.getRange()});
        ok = false;
        break;
      }
      values[i] = defaultOf(param);
    }
    args.push_back({param.name, *values[i]});
  }
  if (!ok)
    return std::nullopt;
  ConfigValue result = ConfigValue::ofCall(fn->name, std::move(args));
  if (std::string(fn->name) == "uniform" &&
      !(result.arg("low")->number() < result.arg("high")->number()))
    return error(expr.loc(), "uniform needs low < high", {expr.getRange()});
  if (std::string(fn->name) == "trunc_normal" &&
      !(result.arg("a")->number() < result.arg("b")->number()))
    return error(expr.loc(), "trunc_normal needs a < b", {expr.getRange()});
  return result;
}

bool Sema::namesInitializer(const std::string &name) const {
  // A variable, layer or builtin of the same name comes first.
  if (!frames.empty() && frames.back().scope->lookup(name))
    return false;
  const Module *from =
      !frames.empty() && frames.back().self && frames.back().self->def
          ? frames.back().self->def->module
          : nullptr;
  if (program.find(name, from) || findBuiltin(name))
    return false;
  return findFunction(initializerFamily(), name) != nullptr;
}

Val Sema::evalInitializer(const Expr &expr) {
  std::optional<ConfigValue> init = evalSetting(expr, initializerFamily());
  if (!init)
    return Val::error();
  return Val::of(Val::Kind::Initializer, &Val::initializer, std::move(*init));
}

/// `blocks.*.mlp.fc1.weight` against `blocks.3.mlp.fc1.weight`: `*` stands
/// for exactly one path component.
static bool matchesPattern(llvm::StringRef pattern, llvm::StringRef path) {
  llvm::SmallVector<llvm::StringRef> want, have;
  pattern.split(want, '.');
  path.split(have, '.');
  if (want.size() != have.size())
    return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != "*" && want[i] != have[i])
      return false;
  return true;
}

/// The train section's `loss = ...`, with the model's output `output`.
std::optional<int> Sema::evalLoss(const Expr &expr, int output) {
  Val loss;
  auto *name = llvm::dyn_cast<NameExpr>(&expr);
  const Builtin *builtin = name ? findBuiltin(name->name) : nullptr;
  if (builtin && output < 0) {
    return std::nullopt; // the forward failed; its error was reported
  } else if (builtin && (std::string(builtin->name) == "cross_entropy" ||
                         std::string(builtin->name) == "mse")) {
    // `loss = cross_entropy`: apply it to the output and the one target.
    std::vector<const GraphArg *> targets;
    for (const GraphArg &arg : graph.args)
      if (arg.role == ArgRole::Target)
        targets.push_back(&arg);
    if (targets.size() != 1)
      return error(expr.loc(),
                   "'loss = " + name->name +
                       "' needs exactly one 'target'; with " +
                       std::to_string(targets.size()) +
                       ", write 'loss = " + name->name + "(output, <target>)'",
                   {expr.getRange()});
    BoundArgs args;
    args.sema = this;
    args.callee = builtin->name;
    args.loc = expr.loc();
    args.range = expr.getRange();
    args.values = {Val::ofTensor(output),
                   Val::ofTensor(targets.front()->value)};
    args.ranges.assign(builtin->params.size(), expr.getRange());
    args.given.assign(builtin->params.size(), false);
    args.given[0] = args.given[1] = true;
    args.values.resize(builtin->params.size());
    loss = builtin->run(*this, args);
  } else {
    loss = eval(expr);
  }
  if (loss.isError())
    return std::nullopt;
  if (!loss.isTensor() || !typeOf(loss.tensor).shape.empty() ||
      !isFloat(typeOf(loss.tensor).dtype))
    return error(expr.loc(),
                 "the loss must be a floating-point scalar, not " +
                     describe(loss),
                 {expr.getRange()});
  return loss.tensor;
}

void Sema::evalDirective(
    const DirectiveStmt &directive,
    std::map<std::string, std::pair<std::string, llvm::SMLoc>> &directiveOf) {
  const DirectiveStmt *dir = &directive;
  const char *kind = dir->isPrune ? "prune" : "quantize";
  auto value = evalSetting(*dir->value, dir->isPrune ? pruningFamily()
                                                     : quantizationFamily());
  std::vector<std::string> params, matched;
  for (const GraphArg &arg : graph.args)
    if (arg.role == ArgRole::Param) {
      params.push_back(arg.name);
      if (matchesPattern(dir->pattern, arg.name))
        matched.push_back(arg.name);
    }
  if (matched.empty()) {
    std::string best = closestMatch(dir->pattern, params);
    error(dir->patternRange.Start,
          "no parameter matches '" + dir->pattern + "'" +
              (best.empty() ? "" : "; did you mean '" + best + "'?"),
          {dir->patternRange});
    return;
  }
  bool clash = false;
  for (const std::string &p : matched) {
    auto key = std::string(kind) + ":" + p;
    auto [it, inserted] =
        directiveOf.emplace(key, std::make_pair(dir->pattern, dir->loc()));
    if (!inserted && !clash) {
      error(dir->patternRange.Start,
            "parameter '" + p + "' is already given a '" + kind + "' directive",
            {dir->patternRange});
      diags.note(it->second.second, "the earlier directive is here");
      clash = true;
    }
  }
  if (!value || clash)
    return;
  // Each matched weight must suit the directive: f32; N:M groups or
  // quantization groups dividing its rows; the dim it prunes along.
  auto integer = [&](const char *name, int64_t fallback) {
    const ConfigValue *v = value->arg(name);
    return v ? int64_t(v->number()) : fallback;
  };
  auto problem = [&](const TensorType &type) -> std::string {
    if (type.dtype != ElementType::F32)
      return dir->isPrune ? "pruning needs f32 parameters"
                          : "quantization needs f32 parameters";
    if (dir->isPrune)
      return shape::pruneProblem(value->text, type.shape, integer("dim", 0),
                                 integer("n", 2), integer("m", 4));
    const ConfigValue *granularity = value->arg("granularity");
    int64_t group = integer("group", 128), row = shape::rowLength(type.shape);
    if (value->text == "qat" || !granularity ||
        granularity->text != "per_group" || row % group == 0)
      return "";
    return "groups of " + std::to_string(group) +
           " must divide each row, and these rows have " + std::to_string(row);
  };
  bool unfit = false;
  for (const GraphArg &a : graph.args) {
    if (a.role != ArgRole::Param ||
        std::find(matched.begin(), matched.end(), a.name) == matched.end())
      continue;
    const TensorType &type = typeOf(a.value);
    std::string why = problem(type);
    if (!why.empty()) {
      error(dir->patternRange.Start,
            std::string("cannot ") + (dir->isPrune ? "prune" : "quantize") +
                " '" + a.name + "' (" + type.str() + "): " + why,
            {dir->patternRange});
      unfit = true;
    }
  }
  if (unfit)
    return;
  ConfigValue list;
  list.kind = ConfigValue::Kind::List;
  for (const std::string &p : matched)
    list.list.push_back(ConfigValue::ofString(p));
  value->args.push_back({"params", list});
  graph.train.push_back({kind, *value});
}

/// A train setting other than the optimizer, schedule and loss
/// (precision, keep_f32, memory_budget, ...): its value checked, or nothing
/// with `why` it is not one.
static std::optional<ConfigValue> checkTrainSetting(const std::string &key,
                                                    const ConfigValue &value,
                                                    std::string &why) {
  if (key == "precision") {
    std::string p = value.kind == ConfigValue::Kind::Symbol ? value.text : "";
    if (p == "fp32")
      p = "f32";
    if (p == "fp16")
      p = "f16";
    if (p == "f32" || p == "bf16" || p == "f16")
      return ConfigValue::ofSymbol(p);
    why = "must be f32, bf16 or f16";
    return std::nullopt;
  }
  if (key == "keep_f32") {
    // Layers (by name, as in parameter paths: "head", "blocks.0.mlp") that
    // mixed precision leaves in f32.
    bool names = value.kind == ConfigValue::Kind::List;
    for (const ConfigValue &v : value.list)
      names = names && (v.kind == ConfigValue::Kind::String ||
                        v.kind == ConfigValue::Kind::Symbol);
    if (names)
      return value;
    why = "must be a list of layer names such as [\"head\"]";
    return std::nullopt;
  }
  if (key == "memory_budget") {
    if (value.kind == ConfigValue::Kind::Int && value.intValue > 0)
      return value;
    why = "must be a positive size such as 512MiB or 2GB";
    return std::nullopt;
  }
  ParamType type = key == "clip_grad_norm" ? ParamType::Positive
                   : key == "seed"         ? ParamType::NonNegativeInt
                                           : ParamType::PositiveInt;
  return checkParam(optional(key.c_str(), type, 0), value, why);
}

void Sema::evalTrain(const TrainStmt &train, int output,
                     const std::vector<const Stmt *> &extraDirectives) {
  // The loss sees the model's output as `output`, next to inputs and targets.
  Scope &scope = *frame().scope;
  scope.vars["output"] = output >= 0 ? Val::ofTensor(output) : Val::error();

  std::map<std::string, llvm::SMLoc> seen;
  std::map<std::string, std::pair<std::string, llvm::SMLoc>> directiveOf;
  std::optional<int> lossValue;
  const std::vector<std::string> keys = {
      "optimizer",      "schedule", "loss",  "precision", "memory_budget",
      "clip_grad_norm", "epochs",   "steps", "seed",      "keep_f32"};
  std::vector<const Stmt *> statements;
  for (const StmtPtr &stmt : train.settings)
    statements.push_back(stmt.get());
  statements.insert(statements.end(), extraDirectives.begin(),
                    extraDirectives.end());
  for (const Stmt *stmt : statements) {
    if (auto *dir = llvm::dyn_cast<DirectiveStmt>(stmt)) {
      evalDirective(*dir, directiveOf);
      continue;
    }
    auto &bind = llvm::cast<BindStmt>(*stmt);
    const std::string &key = bind.name;
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      error(bind.nameRange.Start, unknownMessage("train setting", key, keys),
            {bind.nameRange});
      continue;
    }
    auto [it, inserted] = seen.emplace(key, bind.loc());
    if (!inserted) {
      error(bind.nameRange.Start, "'" + key + "' is set twice",
            {bind.nameRange});
      diags.note(it->second, "it was first set here");
      continue;
    }
    const Expr &expr = *bind.value;
    if (key == "optimizer" || key == "schedule") {
      if (auto v = evalSetting(expr, key == "optimizer" ? optimizerFamily()
                                                        : scheduleFamily()))
        graph.train.push_back({key, *v});
      continue;
    }
    if (key == "loss") {
      std::optional<int> loss = evalLoss(expr, output);
      if (!loss)
        continue;
      lossValue = *loss;
      std::string what =
          graph.nodes.empty() || graph.nodes.back().result != *loss
              ? std::string("custom")
              : graph.nodes.back().op;
      graph.train.push_back({key, ConfigValue::ofSymbol(what)});
      continue;
    }
    auto value = evalSettingValue(expr);
    if (!value)
      continue;
    std::string why;
    std::optional<ConfigValue> checked = checkTrainSetting(key, *value, why);
    if (!checked) {
      error(expr.loc(), "'" + key + "' " + why + ", not " + value->str(),
            {expr.getRange()});
      continue;
    }
    graph.train.push_back({key, *checked});
  }
  if (lossValue) {
    graph.outputs = {*lossValue, output};
    graph.outputNames = {"loss", "output"};
  } else {
    graph.outputs = {output};
    graph.outputNames = {"output"};
  }
}
