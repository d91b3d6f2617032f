//===- SemaInternal.h - Shared state of semantic analysis -------*- C++ -*-===//
//
// Private to frontend/: the evaluator (Sema.cpp), the builtin op table
// (Builtins.cpp) and the settings schemas (Settings.cpp) share this class.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_FRONTEND_SEMAINTERNAL_H
#define MNEMO_FRONTEND_SEMAINTERNAL_H

#include "frontend/AST.h"
#include "frontend/Diagnostics.h"
#include "frontend/Graph.h"
#include "frontend/Program.h"
#include "frontend/Sema.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <deque>
#include <map>
#include <optional>
#include <set>

namespace mnemo::sema {

struct LayerInstance;
struct Builtin;

/// A compile-time value: a number, a tensor (a graph value), a layer, ...
struct Val {
  enum class Kind {
    Error, // already diagnosed; operations on it stay silent
    Int,
    Float,
    Bool,
    String,
    Size,
    Symbol,
    ElementType,
    Tensor,
    List,
    Layer,
    LayerDef,
    Builtin,
    None,        // `none`: a hyper-parameter left to the layer's own default
    Initializer, // `normal(std = 0.02)` as a value, for `param ... = init`
  };
  Kind kind = Kind::Error;
  int64_t i = 0; // Int, Size (bytes)
  double f = 0;  // Float
  bool b = false;
  std::string s; // String, Symbol
  ElementType dtype = ElementType::F32;
  int tensor = -1;
  std::vector<Val> list;
  LayerInstance *layer = nullptr;
  const Definition *def = nullptr;
  const Builtin *builtin = nullptr;
  ConfigValue initializer; // Initializer: the call, defaults filled in

  Val() = default;
  explicit Val(Kind kind) : kind(kind) {}
  static Val error() { return Val(); }
  /// A value of `kind` whose `field` holds `value`:
  /// Val::of(Val::Kind::Size, &Val::i, bytes).
  template <typename Field, typename T>
  static Val of(Kind kind, Field Val::*field, T &&value) {
    Val x(kind);
    x.*field = std::forward<T>(value);
    return x;
  }
  static Val ofInt(int64_t v) { return of(Kind::Int, &Val::i, v); }
  static Val ofFloat(double v) { return of(Kind::Float, &Val::f, v); }
  static Val ofBool(bool v) { return of(Kind::Bool, &Val::b, v); }
  static Val ofTensor(int id) { return of(Kind::Tensor, &Val::tensor, id); }
  static Val ofLayer(LayerInstance *l) {
    return of(Kind::Layer, &Val::layer, l);
  }

  bool isError() const { return kind == Kind::Error; }
  bool isNumber() const { return kind == Kind::Int || kind == Kind::Float; }
  bool isTensor() const { return kind == Kind::Tensor; }
  double number() const { return kind == Kind::Int ? double(i) : f; }
};

/// The result of a reported error: converts to an error Val or to nullopt.
struct ErrorReported {
  operator Val() const { return Val::error(); }
  template <typename T> operator std::optional<T>() const {
    return std::nullopt;
  }
};

struct Scope {
  std::map<std::string, Val> vars;
  Scope *parent = nullptr;

  Val *lookup(const std::string &name) {
    for (Scope *s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end())
        return &it->second;
    }
    return nullptr;
  }
};

/// One instantiated layer (or the model itself, whose path is empty).
struct LayerInstance {
  const Definition *def = nullptr; // null for a `repeat` sequence
  std::string typeName;            // Linear, or repeat[Block]
  std::string path;                // blocks.3.attn
  Scope members;                   // hyper-parameters, params, sub-layers
  const ForwardStmt *forward = nullptr;
  std::vector<LayerInstance *> sequence; // the layers of a repeat
  /// The buffers among the members: name -> the buffer's argument value.
  std::map<std::string, int> buffers;
};

class Sema;

/// The arguments of a builtin call, bound to its parameters by position or
/// keyword. Missing optional arguments are Error values with given = false.
struct BoundArgs {
  Sema *sema = nullptr; // reports the coercions' errors
  std::vector<Val> values;
  std::vector<llvm::SMRange> ranges;
  std::vector<bool> given;
  llvm::SMLoc loc;         // the call
  llvm::SMRange range;     // the whole call
  const char *callee = ""; // the builtin's name: its op's, where one op

  bool has(size_t i) const { return given[i]; }

  // Sema's coercions of the argument at `slot`, its errors pointing there.
  std::optional<int64_t> asInt(size_t slot, const llvm::Twine &what);
  std::optional<double> asNumber(size_t slot, const llvm::Twine &what);
  std::optional<bool> asBool(size_t slot, const llvm::Twine &what);
  std::optional<std::vector<int64_t>> asIntList(size_t slot,
                                                const llvm::Twine &what);
  std::optional<int> asTensor(size_t slot, const llvm::Twine &what);
  std::optional<int> asFloatTensor(size_t slot, const llvm::Twine &what);
  std::optional<ElementType> asDType(size_t slot, const llvm::Twine &what);
  // An optional argument's: `dflt` when it is not given.
  std::optional<int64_t> intOr(size_t slot, int64_t dflt, const char *what);
  std::optional<double> numberOr(size_t slot, double dflt, const char *what);
  std::optional<bool> boolOr(size_t slot, bool dflt, const char *what);
};

struct Builtin {
  const char *name;
  std::vector<const char *> params; // the first `required` are required
  size_t required;
  Val (*run)(Sema &sema, BoundArgs &args);
};

const std::vector<Builtin> &builtinTable();
/// The values of op `op` on constant operands (`operands`, row-major, of
/// `types`), computed at compile time; nullopt when it is not folded
/// (ConstantFolding.cpp).
std::optional<std::vector<double>>
foldConstant(llvm::StringRef op,
             const std::vector<const std::vector<double> *> &operands,
             const std::vector<TensorType> &types, const TensorType &result,
             const std::vector<NamedAttr> &attrs);
/// scan(cell, xs, state, args = [], axis = 1, reverse = false) (Scan.cpp).
Val scanBuiltin(Sema &sema, BoundArgs &args);
const Builtin *findBuiltin(llvm::StringRef name);

/// A family of named setting functions (initializers, optimizers, ...), for
/// validating `normal(std=0.02)` or `adamw(lr=3e-4)`.
struct SettingFamily;

class Sema {
public:
  Sema(const Program &program, Diagnostics &diags)
      : program(program), diags(diags) {}

  std::optional<Graph> run(const ElaborateOptions &options);

  //===--------------------------------------------------------------------===//
  // Services for builtins
  //===--------------------------------------------------------------------===//

  /// An error at `loc`, followed by notes naming the layer calls that led
  /// there. What it returns stands for the failed result, so that
  /// `return error(...)` ends an evaluation (an error Val) or a reader of
  /// an optional value (nullopt).
  ErrorReported error(llvm::SMLoc loc, const llvm::Twine &message,
                      llvm::ArrayRef<llvm::SMRange> ranges = {});

  /// A reference into the value table, valid until the next emit (which may
  /// grow the table): copy a type that must outlive an emitted op.
  const TensorType &typeOf(int value) const { return graph.values[value]; }
  /// Appends op `op` to the graph and returns its result value; an op of
  /// constants becomes the constant it computes.
  int emit(llvm::StringRef op, std::vector<int> operands, TensorType result,
           std::vector<NamedAttr> attrs, llvm::SMLoc loc);
  /// Appends op `op` with several results and returns their values.
  std::vector<int> emitResults(llvm::StringRef op, std::vector<int> operands,
                               std::vector<TensorType> results,
                               std::vector<NamedAttr> attrs, llvm::SMLoc loc);
  /// Whether the forward being elaborated is the training one; reading it
  /// makes the model elaborate its forward a second time, for evaluation.
  bool isTraining() {
    modeDependent = true;
    return training;
  }
  /// Whether this is the evaluation forward (which dropout skips); unlike
  /// isTraining, asking does not make the model elaborate it.
  bool evaluating() const { return !training; }
  /// Gives the buffer whose current value is `value` the value `updated`
  /// (as an in-place update in PyTorch); false if `value` is no buffer's.
  bool updateBuffer(int value, int updated);
  int splat(double value, TensorType type, llvm::SMLoc loc);
  /// `value` broadcast to `shape` (no op when it already has that shape).
  int broadcastTo(int value, const shape::Shape &shape, llvm::SMLoc loc);

  // Coercions that report an error (pointing at `range`) and return nullopt.
  ErrorReported notA(const Val &v, llvm::SMRange range, const llvm::Twine &what,
                     const char *expected);
  std::optional<int64_t> asInt(const Val &v, llvm::SMRange range,
                               const llvm::Twine &what);
  std::optional<double> asNumber(const Val &v, llvm::SMRange range,
                                 const llvm::Twine &what);
  std::optional<bool> asBool(const Val &v, llvm::SMRange range,
                             const llvm::Twine &what);
  std::optional<std::vector<int64_t>>
  asIntList(const Val &v, llvm::SMRange range, const llvm::Twine &what);
  std::optional<int> asTensor(const Val &v, llvm::SMRange range,
                              const llvm::Twine &what);
  std::optional<int> asFloatTensor(const Val &v, llvm::SMRange range,
                                   const llvm::Twine &what);
  std::optional<ElementType> asDType(const Val &v, llvm::SMRange range,
                                     const llvm::Twine &what);

  /// "f32[128,784]", "the integer 3", "layer 'fc1' (Linear)".
  std::string describe(const Val &v) const;

  /// Tensor comparisons (`ids == 0`) and boolean logic on masks.
  Val compareTensors(BinaryOp op, const Val &lhs, const Val &rhs,
                     llvm::SMLoc loc, llvm::SMRange lhsRange,
                     llvm::SMRange rhsRange);
  Val logicalTensors(const char *kind, const Val &lhs, const Val &rhs,
                     llvm::SMLoc loc, llvm::SMRange lhsRange,
                     llvm::SMRange rhsRange);
  std::optional<std::pair<int, int>>
  broadcastPair(const Val &lhs, const Val &rhs, llvm::SMLoc loc,
                llvm::SMRange lhsRange, llvm::SMRange rhsRange,
                const std::string &what);
  Val binary(BinaryOp op, const Val &lhs, const Val &rhs, llvm::SMLoc loc,
             llvm::SMRange lhsRange, llvm::SMRange rhsRange);
  Val matmul(int lhs, int rhs, llvm::SMLoc loc, llvm::SMRange range);
  /// `/`, `//` and `%` of integer tensors (of one shape), as torch's: true
  /// division in f32, torch.floor_divide, torch.remainder.
  Val integerDivision(BinaryOp op, int lhs, int rhs, llvm::SMLoc loc);
  /// `//` or `%` of integer tensors whose divisor has no zero.
  int flooredDivision(BinaryOp op, int lhs, int rhs, llvm::SMLoc loc);

  /// Calls `layer`'s forward with `args` (as `layer(args...)` would).
  Val callLayer(LayerInstance &layer, std::vector<Val> args, llvm::SMLoc loc) {
    std::vector<llvm::SMRange> ranges(args.size());
    return applyWith(layer, std::move(args), ranges, loc);
  }

  int64_t nextDropoutSeed() { return dropoutSeeds++; }

  /// The elements of a constant value (a splat expanded: ask splatValue
  /// first where the value may be large), or nullopt.
  std::optional<std::vector<double>> constantValues(int value) const;
  /// The number a splat constant (or a broadcast of one) repeats, or
  /// nullopt.
  std::optional<double> splatValue(int value) const;
  /// Tables larger than this are computed by the step instead (as arange's
  /// limit).
  static constexpr int64_t kMaxFoldedElements = int64_t(1) << 20;

  Graph graph;

private:
  friend struct SettingsEvaluator;

  enum class Mode { Body, Forward, Train };
  struct Frame {
    LayerInstance *self;
    Mode mode;
    Scope *scope;
    llvm::SMLoc site; // the call or construction that opened the frame
  };

  /// The `checkpoint` block being executed (each execution of one is a
  /// block of its own: in a repeat, one per layer), or -1.
  int checkpointBlock = -1;
  int checkpointBlocks = 0;

  // Statements.
  void execBlock(const Block &block);
  void execStmt(const Stmt &stmt);
  void execBind(const BindStmt &bind);
  /// `let a, b = e` and `a, b = e`: e is a tuple of as many values.
  void execTupleBind(const BindStmt &bind, bool isLet);
  /// Where a binding's value goes: a new local, an existing name, a
  /// buffer (checked for its type), or nowhere after an error.
  struct BindTarget {
    enum Kind { New, Existing, Buffer, Invalid } kind = New;
    Val *existing = nullptr;
    bool undefined = false; // Invalid: the name is not defined at all
  };
  BindTarget bindTarget(bool isLet, const std::string &name,
                        llvm::SMRange nameRange);
  void storeBinding(const BindTarget &target, const std::string &name,
                    const Val &value, const Expr &valueExpr);
  void execParam(const ParamStmt &param);
  /// for i in A..B { }: in a body the block runs in the layer's scope (what
  /// it declares are members, named with templates: `weight_l{i}`); in a
  /// forward each pass gets a scope of its own.
  void execFor(const ForStmt &loop);
  /// `weight_ih_l{k}` with k's value filled in (k a compile-time integer);
  /// a name without braces as it is; "" after reporting an error.
  std::string expandName(const std::string &name, llvm::SMRange range);
  /// How many `for` loops of layer bodies are running (their passes
  /// declare members, so a plain name declared twice gets a hint).
  int bodyLoops = 0;
  void execData(const DataStmt &data);

  // Expressions.
  Val eval(const Expr &expr);
  Val evalName(const NameExpr &name);
  Val evalMember(const MemberExpr &member);
  Val evalCall(const CallExpr &call);
  /// Matches `call`'s arguments to `params`, in order, then by name: each
  /// goes to `bind(slot, argument)` (false if it fails, having said why).
  /// Reports a positional argument after a keyword one, one too many
  /// (`tooMany`), an unknown name (`unknown(name)`) and a `kind` given
  /// twice. False if any was reported or a bind failed.
  bool matchArguments(const CallExpr &call,
                      llvm::ArrayRef<llvm::StringRef> params,
                      llvm::StringRef kind, const std::string &tooMany,
                      llvm::function_ref<std::string(llvm::StringRef)> unknown,
                      llvm::function_ref<bool(size_t, const Argument &)> bind);
  Val callBuiltin(const Builtin &builtin, const CallExpr &call);
  Val construct(const Definition &def, const CallExpr &call,
                const std::string &name);
  Val constructRepeat(const RepeatExpr &repeat, const std::string &name);
  /// Whether every element of `list` creates a layer (`[Conv2d(...),
  /// BatchNorm2d(...)]`): bound in a body, the list is a sequence.
  bool createsLayers(const ListExpr &list);
  Val constructSequence(const ListExpr &list, const std::string &name);
  /// A sequence instance named `name` in the current layer, with a frame
  /// (and scope) of its own pushed for constructing its children; the
  /// caller pops it.
  LayerInstance &beginSequence(const std::string &name);
  Val apply(LayerInstance &layer, const CallExpr &call);
  Val applyWith(LayerInstance &layer, std::vector<Val> args,
                const std::vector<llvm::SMRange> &ranges, llvm::SMLoc loc);
  std::optional<TensorType> evalType(const TypeSpec &type);
  void suggestName(const std::string &name, llvm::SMRange range);
  /// Whether `name`, unbound in the current scope, is an initializer's
  /// (`normal`, `zeros`): then `normal(std = 0.02)` evaluates to a value.
  bool namesInitializer(const std::string &name) const;
  /// `normal(std = 0.02)` or `zeros` evaluated as a value (Kind::Initializer).
  Val evalInitializer(const Expr &expr);
  static std::string abbreviatePath(llvm::StringRef path);
  /// The error for a chain of creations or calls deeper than kMaxDepth;
  /// `what` names the step that would pass it.
  void reportNestingLimit(llvm::SMLoc loc, llvm::SMRange range,
                          const std::string &what);
  /// Whether `instance` (just bound, on top of the frames) has an enclosing
  /// layer of the same definition and hyper-parameters; reports it if so.
  bool containsItself(const LayerInstance &instance);
  /// Outermost layers whose chain has hit the nesting limit (reported once).
  std::set<const LayerInstance *> nestingReported;
  /// Whether the name being evaluated is a call's callee (`name(...)`).
  bool evaluatingCallee = false;

  // Settings: the train section and parameter initializers.
  std::optional<ConfigValue> evalSetting(const Expr &expr,
                                         const SettingFamily &family);
  std::optional<ConfigValue> evalSettingValue(const Expr &expr);
  /// The value of the train section's loss expression, given the output.
  std::optional<int> evalLoss(const Expr &expr, int output);
  /// The train section, and the directives of the command line after it.
  void evalTrain(const TrainStmt &train, int output,
                 const std::vector<const Stmt *> &extraDirectives);
  /// A prune or quantize directive, for the parameters its pattern matches;
  /// `directiveOf` maps "prune:NAME" (or quantize) to the pattern and place
  /// of the directive that took the parameter, so that no parameter gets
  /// two.
  void evalDirective(
      const DirectiveStmt &directive,
      std::map<std::string, std::pair<std::string, llvm::SMLoc>> &directiveOf);

  Frame &frame() { return frames.back(); }
  SourceTrace traceAt(llvm::SMLoc loc) const;
  SourcePos position(llvm::SMLoc loc) const;
  bool bindHyperParams(const Definition &def, LayerInstance &instance,
                       const CallExpr *call);

  const Program &program;
  Diagnostics &diags;
  std::deque<LayerInstance> instances;
  std::deque<Scope> scopes;
  std::vector<Frame> frames;
  std::optional<Val> returned;              // set by `return` in a forward
  const std::string *pendingName = nullptr; // the binding a constructor names
  const TrainStmt *trainStmt = nullptr;
  const ForwardStmt *modelForward = nullptr;
  std::map<std::string, std::string> overrides;
  int64_t dropoutSeeds = 0;
  /// Constant values: value id -> the node that defines it.
  std::map<int, size_t> constantNodes;
  bool tooLarge = false;
  /// The forward's mode (`training`), and whether anything depended on it.
  bool training = true;
  bool modeDependent = false;
  /// Every buffer: its layer, member name and argument value.
  struct BufferMember {
    LayerInstance *layer;
    std::string name;
    int value;
  };
  std::vector<BufferMember> bufferMembers;
  /// Runs the model's forward with `locals` as its scope; its value, if it
  /// returned one.
  std::optional<Val> runModelForward(LayerInstance &root, Scope &locals);
  /// Runs the model's forward for evaluation (`training` false) after the
  /// training one; adds its output and loss to the graph's outputs.
  bool elaborateEvaluation(LayerInstance &root, int trainingOutput);

public:
  /// Bounds that keep elaboration finite on any input.
  static constexpr size_t kMaxDepth = 48;
  static constexpr int64_t kMaxRepeat = 10000;
  /// Ops, parameters and layer instances together.
  static constexpr size_t kMaxWork = 1000000;

private:
  bool spendWork(llvm::SMLoc loc);
  size_t work = 0;
};

} // namespace mnemo::sema

#endif // MNEMO_FRONTEND_SEMAINTERNAL_H
