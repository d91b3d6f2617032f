//===- AST.h - Syntax tree of Mnemo model files -----------------*- C++ -*-===//
//
// What the parser produces: the program as written, with a source location on
// every node. Meaning (names, hyper-parameter values, shapes) is given by Sema.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_FRONTEND_AST_H
#define MNEMO_FRONTEND_AST_H

#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
class SourceMgr;
} // namespace llvm

namespace mnemo {

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

class Expr {
public:
  enum class Kind {
    Number,
    Size,
    Bool,
    String,
    Name,
    Member,
    Call,
    Unary,
    Binary,
    List,
    Repeat
  };

  Expr(Kind kind, llvm::SMRange range) : kind(kind), range(range) {}
  virtual ~Expr() = default;

  Kind getKind() const { return kind; }
  llvm::SMLoc loc() const { return range.Start; }
  llvm::SMRange getRange() const { return range; }

private:
  Kind kind;
  llvm::SMRange range;
};

using ExprPtr = std::unique_ptr<Expr>;

/// 128, 0.02, 1e-3.
struct NumberExpr : Expr {
  NumberExpr(llvm::SMRange r, bool isInt, int64_t i, double f)
      : Expr(Kind::Number, r), isInt(isInt), intValue(i), floatValue(f) {}
  bool isInt;
  int64_t intValue;
  double floatValue;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Number; }
};

/// 512MiB, already in bytes.
struct SizeExpr : Expr {
  SizeExpr(llvm::SMRange r, int64_t bytes)
      : Expr(Kind::Size, r), bytes(bytes) {}
  int64_t bytes;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Size; }
};

struct BoolExpr : Expr {
  BoolExpr(llvm::SMRange r, bool v) : Expr(Kind::Bool, r), value(v) {}
  bool value;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Bool; }
};

struct StringExpr : Expr {
  StringExpr(llvm::SMRange r, std::string v)
      : Expr(Kind::String, r), value(std::move(v)) {}
  std::string value;
  static bool classof(const Expr *e) { return e->getKind() == Kind::String; }
};

/// A bare name: a variable, hyper-parameter, layer, builtin or dtype.
struct NameExpr : Expr {
  NameExpr(llvm::SMRange r, std::string n)
      : Expr(Kind::Name, r), name(std::move(n)) {}
  std::string name;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Name; }
};

/// base.member, as in `wte.weight` or `x.T`.
struct MemberExpr : Expr {
  MemberExpr(llvm::SMRange r, ExprPtr base, std::string member,
             llvm::SMLoc memberLoc)
      : Expr(Kind::Member, r), base(std::move(base)), member(std::move(member)),
        memberLoc(memberLoc) {}
  ExprPtr base;
  std::string member;
  llvm::SMLoc memberLoc;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Member; }
};

/// An argument of a call; `name` is empty for positional ones.
struct Argument {
  std::string name;
  llvm::SMLoc nameLoc;
  ExprPtr value;
};

/// callee(args): a builtin op, a layer constructor, or a layer application.
struct CallExpr : Expr {
  CallExpr(llvm::SMRange r, ExprPtr callee, std::vector<Argument> args)
      : Expr(Kind::Call, r), callee(std::move(callee)), args(std::move(args)) {}
  ExprPtr callee;
  std::vector<Argument> args;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Call; }
};

struct UnaryExpr : Expr {
  UnaryExpr(llvm::SMRange r, char op, ExprPtr operand)
      : Expr(Kind::Unary, r), op(op), operand(std::move(operand)) {}
  char op; // '-', or '!' for `not`
  ExprPtr operand;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Unary; }
};

enum class BinaryOp {
#define BINARY_OP(Name, Spelling, Verb) Name,
#include "frontend/BinaryOps.def"
};
inline bool isComparison(BinaryOp op) {
  return op >= BinaryOp::Eq && op <= BinaryOp::Ge;
}
const char *spell(BinaryOp op);

struct BinaryExpr : Expr {
  BinaryExpr(llvm::SMRange r, BinaryOp op, llvm::SMLoc opLoc, ExprPtr lhs,
             ExprPtr rhs)
      : Expr(Kind::Binary, r), op(op), opLoc(opLoc), lhs(std::move(lhs)),
        rhs(std::move(rhs)) {}
  BinaryOp op;
  llvm::SMLoc opLoc;
  ExprPtr lhs, rhs;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Binary; }
};

/// [a, b, c]: shapes, axes, lists of tensors.
struct ListExpr : Expr {
  ListExpr(llvm::SMRange r, std::vector<ExprPtr> elements)
      : Expr(Kind::List, r), elements(std::move(elements)) {}
  std::vector<ExprPtr> elements;
  static bool classof(const Expr *e) { return e->getKind() == Kind::List; }
};

/// repeat N { Layer(...) }: N instances named name.0 ... name.N-1, applied in
/// sequence.
/// repeat N { Layer(...) }, or repeat i in A..B { Layer(..., i) }: the
/// layer created for each index (B - A of them; start is null in the
/// first form).
struct RepeatExpr : Expr {
  RepeatExpr(llvm::SMRange r, ExprPtr count, ExprPtr body,
             std::string indexName = "", ExprPtr start = nullptr)
      : Expr(Kind::Repeat, r), count(std::move(count)), body(std::move(body)),
        indexName(std::move(indexName)), start(std::move(start)) {}
  ExprPtr count; // N, or B: the end of the range
  ExprPtr body;
  std::string indexName;
  ExprPtr start;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Repeat; }
};

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

/// f32[batch, 28, 28].
struct TypeSpec {
  std::string dtype;
  llvm::SMRange dtypeRange;
  std::vector<ExprPtr> dims;
  llvm::SMRange range;
};

class Stmt {
public:
  enum class Kind {
    Let,
    Assign,
    Expr,
    Return,
    If,
    Param,
    Data,
    Forward,
    Train,
    Directive,
    Checkpoint,
    For
  };
  Stmt(Kind kind, llvm::SMLoc loc) : kind(kind), location(loc) {}
  virtual ~Stmt() = default;
  Kind getKind() const { return kind; }
  llvm::SMLoc loc() const { return location; }

private:
  Kind kind;
  llvm::SMLoc location;
};

using StmtPtr = std::unique_ptr<Stmt>;
using Block = std::vector<StmtPtr>;

/// `let name = value` binds a new name; `name = value` rebinds one.
struct BindStmt : Stmt {
  BindStmt(Kind k, llvm::SMLoc loc, std::string name, llvm::SMRange nameRange,
           ExprPtr value)
      : Stmt(k, loc), name(std::move(name)), nameRange(nameRange),
        value(std::move(value)) {}
  std::string name;
  llvm::SMRange nameRange;
  ExprPtr value;
  /// `let a, b = ...`: the names after the first.
  std::vector<std::pair<std::string, llvm::SMRange>> moreNames;
  static bool classof(const Stmt *s) {
    return s->getKind() == Kind::Let || s->getKind() == Kind::Assign;
  }
};

/// A call evaluated for its effect, such as assert(dim % heads == 0, "...").
struct ExprStmt : Stmt {
  ExprStmt(llvm::SMLoc loc, ExprPtr value)
      : Stmt(Kind::Expr, loc), value(std::move(value)) {}
  ExprPtr value;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Expr; }
};

struct ReturnStmt : Stmt {
  ReturnStmt(llvm::SMLoc loc, ExprPtr value)
      : Stmt(Kind::Return, loc), value(std::move(value)) {}
  ExprPtr value;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Return; }
};

/// if cond { ... } else { ... }, decided at compile time.
struct IfStmt : Stmt {
  IfStmt(llvm::SMLoc loc, ExprPtr cond, Block thenBlock, Block elseBlock)
      : Stmt(Kind::If, loc), cond(std::move(cond)),
        thenBlock(std::move(thenBlock)), elseBlock(std::move(elseBlock)) {}
  ExprPtr cond;
  Block thenBlock, elseBlock;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::If; }
};

/// checkpoint { ... }: the activations computed inside are not kept for the
/// backward but recomputed there from the block's inputs (its outputs, the
/// values used after it, are kept), as torch.utils.checkpoint.
struct CheckpointStmt : Stmt {
  CheckpointStmt(llvm::SMLoc loc, Block body)
      : Stmt(Kind::Checkpoint, loc), body(std::move(body)) {}
  Block body;
  static bool classof(const Stmt *s) {
    return s->getKind() == Kind::Checkpoint;
  }
};

/// param name: type = init, or buffer name: type = init (state that is not
/// trained: running statistics, counters, constant tables).
/// for i in A..B { ... }: the block once per index, decided at compile
/// time (the loop is unrolled).
struct ForStmt : Stmt {
  ForStmt(llvm::SMLoc loc, std::string indexName, llvm::SMRange indexRange,
          ExprPtr start, ExprPtr end, Block body)
      : Stmt(Kind::For, loc), indexName(std::move(indexName)),
        indexRange(indexRange), start(std::move(start)), end(std::move(end)),
        body(std::move(body)) {}
  std::string indexName;
  llvm::SMRange indexRange;
  ExprPtr start, end;
  Block body;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::For; }
};

struct ParamStmt : Stmt {
  ParamStmt(llvm::SMLoc loc, std::string name, llvm::SMRange nameRange,
            TypeSpec type, ExprPtr init, bool isBuffer = false)
      : Stmt(Kind::Param, loc), name(std::move(name)), nameRange(nameRange),
        type(std::move(type)), init(std::move(init)), isBuffer(isBuffer) {}
  std::string name;
  llvm::SMRange nameRange;
  TypeSpec type;
  ExprPtr init; // may be null (diagnosed by Sema)
  bool isBuffer;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Param; }
};

/// input name: type, or target name: type (models only).
struct DataStmt : Stmt {
  DataStmt(llvm::SMLoc loc, bool isTarget, std::string name,
           llvm::SMRange nameRange, TypeSpec type)
      : Stmt(Kind::Data, loc), isTarget(isTarget), name(std::move(name)),
        nameRange(nameRange), type(std::move(type)) {}
  bool isTarget;
  std::string name;
  llvm::SMRange nameRange;
  TypeSpec type;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Data; }
};

struct ForwardStmt : Stmt {
  ForwardStmt(llvm::SMLoc loc,
              std::vector<std::pair<std::string, llvm::SMRange>> params,
              Block body)
      : Stmt(Kind::Forward, loc), params(std::move(params)),
        body(std::move(body)) {}
  std::vector<std::pair<std::string, llvm::SMRange>> params;
  Block body;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Forward; }
};

/// prune PATTERN = method(...) or quantize PATTERN = scheme(...), inside train.
struct DirectiveStmt : Stmt {
  DirectiveStmt(llvm::SMLoc loc, bool isPrune, std::string pattern,
                llvm::SMRange patternRange, ExprPtr value)
      : Stmt(Kind::Directive, loc), isPrune(isPrune),
        pattern(std::move(pattern)), patternRange(patternRange),
        value(std::move(value)) {}
  bool isPrune;
  std::string pattern; // dotted parameter path, `*` matches one component
  llvm::SMRange patternRange;
  ExprPtr value;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Directive; }
};

/// train { key = value ... }: settings are BindStmts, plus directives.
struct TrainStmt : Stmt {
  TrainStmt(llvm::SMLoc loc, Block settings)
      : Stmt(Kind::Train, loc), settings(std::move(settings)) {}
  Block settings;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Train; }
};

//===----------------------------------------------------------------------===//
// Top-level definitions
//===----------------------------------------------------------------------===//

/// name (= default)? in `layer Linear(fan_in, fan_out, bias = true)`.
struct HyperParam {
  std::string name;
  llvm::SMRange range;
  ExprPtr defaultValue; // may be null
};

/// A `layer` or a `model`: hyper-parameters and a body that runs once per
/// instance (declaring parameters, sub-layers and the forward).
struct Module;

struct Definition {
  const Module *module = nullptr; // the file that defines it
  bool isModel = false;
  std::string name;
  llvm::SMRange nameRange;
  std::vector<HyperParam> hyperParams;
  Block body;
};

struct Import {
  std::string path; // dotted: std.nn
  llvm::SMRange range;
};

struct Module {
  std::string fileName;
  std::vector<Import> imports;
  std::vector<std::unique_ptr<Definition>> definitions;
};

/// Writes the tree, one node per line with file:line:col, for --emit=ast.
void printAST(const Module &module, llvm::SourceMgr &sourceMgr,
              llvm::raw_ostream &os);

} // namespace mnemo

#endif // MNEMO_FRONTEND_AST_H
