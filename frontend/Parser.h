//===- Parser.h - Recursive-descent parser for Mnemo ------------*- C++ -*-===//
//
// The grammar is written above each parse function. Statements end at a
// newline or `;`; newlines inside (), [] do not count. After an error the
// parser skips to the end of the statement and goes on, so one run reports
// several independent mistakes.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_FRONTEND_PARSER_H
#define MNEMO_FRONTEND_PARSER_H

#include "frontend/AST.h"
#include "frontend/Lexer.h"

#include "llvm/ADT/Twine.h"

#include <memory>

namespace mnemo {

class Parser {
public:
  /// Parses the buffer with id `bufferId` in the diagnostics' SourceMgr.
  Parser(unsigned bufferId, Diagnostics &diags);

  /// Always returns a module; check diags.hadError() for a clean parse.
  std::unique_ptr<Module> parseModule();
  /// The whole buffer as one `prune PATTERN = ...` or `quantize PATTERN =
  /// ...` directive (mnemoc's --prune and --quantize); null after an error.
  StmtPtr parseDirectiveOnly();

  /// Expressions nested deeper than this are an error, not a stack overflow.
  static constexpr int kMaxNesting = 200;

private:
  // Top level.
  void parseImport(Module &module);
  std::unique_ptr<Definition> parseDefinition();
  bool parseHyperParams(Definition &def);

  // Statements.
  bool parseBlock(Block &block, bool isTrain = false);
  StmtPtr parseStatement();
  StmtPtr parseTrainSetting();
  StmtPtr parseIf();
  StmtPtr parseForward();
  StmtPtr parseTrain();
  bool parseType(TypeSpec &type);
  bool parseDirectivePattern(std::string &pattern, llvm::SMRange &range);

  // Expressions.
  ExprPtr parseExpr();
  ExprPtr parseBinary(int level);
  ExprPtr parseNot();
  ExprPtr parseUnary();
  ExprPtr parsePower();
  ExprPtr parsePostfix();
  ExprPtr parsePostfixFrom(ExprPtr expr, llvm::SMLoc start);
  ExprPtr parsePrimary();
  bool parseArguments(std::vector<Argument> &args);

  // Tokens.
  void advance();
  bool consumeIf(TokenKind kind);
  bool expect(TokenKind kind, const char *context);
  /// An error at the current token. What it returns stands for a failed
  /// parse: it converts to a null node of any kind.
  struct ParseFailed {
    template <typename Node> operator std::unique_ptr<Node>() const {
      return nullptr;
    }
  };
  ParseFailed errorAtCurrent(const llvm::Twine &message);
  /// A name token, consumed.
  struct Name {
    std::string text;
    llvm::SMRange range;
  };
  /// Consumes a name; otherwise reports "expected <what>, found <token>".
  std::optional<Name> expectName(const llvm::Twine &what);
  bool endOfStatement();
  void skipToStatementEnd();
  void skipNewlines();
  /// Enters one level of nesting, or reports that the input nests too deeply.
  bool enterNesting();
  bool chainTooDeep();
  llvm::SMRange rangeFrom(llvm::SMLoc start) const;

  Diagnostics &diags;
  Lexer lexer;
  Token tok;
  const char *prevEnd; // end of the last consumed token, for ranges
  int nesting = 0;
  bool tooDeep = false;
};

/// Convenience: parse a file already added to `diags`' SourceMgr.
std::unique_ptr<Module> parseBuffer(unsigned bufferId, Diagnostics &diags);

} // namespace mnemo

#endif // MNEMO_FRONTEND_PARSER_H
