//===- ASTPrinter.cpp - --emit=ast ----------------------------------------===//
//
// Statements print one per line with their line:col; expressions print as
// s-expressions so that precedence and argument binding are explicit.
//
//===----------------------------------------------------------------------===//

#include "frontend/AST.h"
#include "frontend/Graph.h"

#include "llvm/Support/Casting.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mnemo;
using llvm::dyn_cast;

const char *mnemo::spell(BinaryOp op) {
  switch (op) {
#define BINARY_OP(Name, Spelling, Verb)                                        \
  case BinaryOp::Name:                                                         \
    return Spelling;
#include "frontend/BinaryOps.def"
  }
  return "?";
}

namespace {
class ASTPrinter {
public:
  ASTPrinter(llvm::SourceMgr &sm, llvm::raw_ostream &os) : sm(sm), os(os) {}

  void print(const Module &module) {
    os << "module \"" << module.fileName << "\"\n";
    for (const Import &import : module.imports) {
      indent(1);
      os << "import " << import.path << " " << where(import.range.Start)
         << "\n";
    }
    for (const auto &def : module.definitions)
      printDefinition(*def);
  }

private:
  std::string where(llvm::SMLoc loc) {
    if (!loc.isValid())
      return "<unknown>";
    auto [line, col] = sm.getLineAndColumn(loc);
    return "<" + std::to_string(line) + ":" + std::to_string(col) + ">";
  }

  void indent(int depth) { os.indent(2 * depth); }

  void printDefinition(const Definition &def) {
    indent(1);
    os << (def.isModel ? "model " : "layer ") << def.name << "(";
    for (size_t i = 0; i < def.hyperParams.size(); ++i) {
      const HyperParam &hp = def.hyperParams[i];
      os << (i ? ", " : "") << hp.name;
      if (hp.defaultValue) {
        os << " = ";
        printExpr(*hp.defaultValue);
      }
    }
    os << ") " << where(def.nameRange.Start) << "\n";
    printBlock(def.body, 2);
  }

  void printBlock(const Block &block, int depth) {
    for (const StmtPtr &stmt : block)
      printStmt(*stmt, depth);
  }

  void printType(const TypeSpec &type) {
    os << type.dtype << "[";
    for (size_t i = 0; i < type.dims.size(); ++i) {
      os << (i ? ", " : "");
      printExpr(*type.dims[i]);
    }
    os << "]";
  }

  void printStmt(const Stmt &stmt, int depth) {
    indent(depth);
    if (auto *bind = dyn_cast<BindStmt>(&stmt)) {
      os << (stmt.getKind() == Stmt::Kind::Let ? "let " : "set ") << bind->name
         << " = ";
      printExpr(*bind->value);
    } else if (auto *e = dyn_cast<ExprStmt>(&stmt)) {
      os << "eval ";
      printExpr(*e->value);
    } else if (auto *ret = dyn_cast<ReturnStmt>(&stmt)) {
      os << "return ";
      printExpr(*ret->value);
    } else if (auto *param = dyn_cast<ParamStmt>(&stmt)) {
      os << (param->isBuffer ? "buffer " : "param ") << param->name << ": ";
      printType(param->type);
      if (param->init) {
        os << " = ";
        printExpr(*param->init);
      }
    } else if (auto *data = dyn_cast<DataStmt>(&stmt)) {
      os << (data->isTarget ? "target " : "input ") << data->name << ": ";
      printType(data->type);
    } else if (auto *dir = dyn_cast<DirectiveStmt>(&stmt)) {
      os << (dir->isPrune ? "prune " : "quantize ") << dir->pattern << " = ";
      printExpr(*dir->value);
    } else if (auto *cp = dyn_cast<CheckpointStmt>(&stmt)) {
      os << "checkpoint " << where(stmt.loc()) << "\n";
      printBlock(cp->body, depth + 1);
      return;
    } else if (auto *loop = dyn_cast<ForStmt>(&stmt)) {
      os << "for " << loop->indexName << " in ";
      printExpr(*loop->start);
      os << "..";
      printExpr(*loop->end);
      os << " " << where(stmt.loc()) << "\n";
      printBlock(loop->body, depth + 1);
      return;
    } else if (auto *ifStmt = dyn_cast<IfStmt>(&stmt)) {
      os << "if ";
      printExpr(*ifStmt->cond);
      os << " " << where(stmt.loc()) << "\n";
      printBlock(ifStmt->thenBlock, depth + 1);
      if (!ifStmt->elseBlock.empty()) {
        indent(depth);
        os << "else\n";
        printBlock(ifStmt->elseBlock, depth + 1);
      }
      return;
    } else if (auto *fwd = dyn_cast<ForwardStmt>(&stmt)) {
      os << "forward(";
      for (size_t i = 0; i < fwd->params.size(); ++i)
        os << (i ? ", " : "") << fwd->params[i].first;
      os << ") " << where(stmt.loc()) << "\n";
      printBlock(fwd->body, depth + 1);
      return;
    } else if (auto *train = dyn_cast<TrainStmt>(&stmt)) {
      os << "train " << where(stmt.loc()) << "\n";
      printBlock(train->settings, depth + 1);
      return;
    }
    os << " " << where(stmt.loc()) << "\n";
  }

  void printExpr(const Expr &expr) {
    switch (expr.getKind()) {
    case Expr::Kind::Number: {
      auto &n = llvm::cast<NumberExpr>(expr);
      if (n.isInt)
        os << n.intValue;
      else
        os << ConfigValue::ofFloat(n.floatValue).str();
      return;
    }
    case Expr::Kind::Size:
      os << llvm::cast<SizeExpr>(expr).bytes << "B";
      return;
    case Expr::Kind::Bool:
      os << (llvm::cast<BoolExpr>(expr).value ? "true" : "false");
      return;
    case Expr::Kind::String:
      os << '"';
      os.write_escaped(llvm::cast<StringExpr>(expr).value);
      os << '"';
      return;
    case Expr::Kind::Name:
      os << llvm::cast<NameExpr>(expr).name;
      return;
    case Expr::Kind::Member: {
      auto &m = llvm::cast<MemberExpr>(expr);
      os << "(. ";
      printExpr(*m.base);
      os << " " << m.member << ")";
      return;
    }
    case Expr::Kind::Call: {
      auto &c = llvm::cast<CallExpr>(expr);
      os << "(call ";
      printExpr(*c.callee);
      for (const Argument &arg : c.args) {
        os << " ";
        if (!arg.name.empty())
          os << arg.name << "=";
        printExpr(*arg.value);
      }
      os << ")";
      return;
    }
    case Expr::Kind::Unary: {
      auto &u = llvm::cast<UnaryExpr>(expr);
      os << "(" << (u.op == '!' ? "not" : "-") << " ";
      printExpr(*u.operand);
      os << ")";
      return;
    }
    case Expr::Kind::Binary: {
      auto &b = llvm::cast<BinaryExpr>(expr);
      os << "(" << spell(b.op) << " ";
      printExpr(*b.lhs);
      os << " ";
      printExpr(*b.rhs);
      os << ")";
      return;
    }
    case Expr::Kind::List: {
      auto &l = llvm::cast<ListExpr>(expr);
      os << "[";
      for (size_t i = 0; i < l.elements.size(); ++i) {
        os << (i ? " " : "");
        printExpr(*l.elements[i]);
      }
      os << "]";
      return;
    }
    case Expr::Kind::Repeat: {
      auto &r = llvm::cast<RepeatExpr>(expr);
      os << "(repeat ";
      if (r.start) {
        os << r.indexName << " in ";
        printExpr(*r.start);
        os << "..";
      }
      printExpr(*r.count);
      os << " ";
      printExpr(*r.body);
      os << ")";
      return;
    }
    }
  }

  llvm::SourceMgr &sm;
  llvm::raw_ostream &os;
};
} // namespace

void mnemo::printAST(const Module &module, llvm::SourceMgr &sourceMgr,
                     llvm::raw_ostream &os) {
  ASTPrinter(sourceMgr, os).print(module);
}
