//===- Lexer.h - Tokens of the Mnemo language -------------------*- C++ -*-===//
//
// Turns a source buffer into tokens. Newlines are tokens (they end
// statements) except inside parentheses and brackets, where expressions may
// span lines. `#` starts a comment. No MLIR here: the frontend up to the AST
// uses only llvm/Support.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_FRONTEND_LEXER_H
#define MNEMO_FRONTEND_LEXER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <string>

namespace mnemo {

class Diagnostics;

enum class TokenKind {
#define TOKEN(Name, Description) Name,
#include "frontend/TokenKinds.def"
};

/// A short human name for a token kind, for "expected X" messages.
const char *spell(TokenKind kind);

/// Whether a token can only begin a statement or a definition ('let',
/// 'param', 'model', ...), never appear inside an expression. The lexer and
/// the parser both resynchronize on these after an error.
bool startsStatement(TokenKind kind);

struct Token {
  TokenKind kind = TokenKind::Eof;
  llvm::StringRef text; // points into the source buffer
  int64_t intValue = 0; // Integer and Size (in bytes)
  double floatValue = 0;
  std::string stringValue; // String, without quotes or escapes

  llvm::SMLoc loc() const { return llvm::SMLoc::getFromPointer(text.data()); }
  llvm::SMRange range() const {
    return {loc(), llvm::SMLoc::getFromPointer(text.data() + text.size())};
  }
  bool is(TokenKind k) const { return kind == k; }
};

class Lexer {
public:
  Lexer(llvm::StringRef buffer, Diagnostics &diags);

  /// Produces the next token; Eof forever at the end.
  Token next();

private:
  Token make(TokenKind kind, const char *start);
  Token lexNumber(const char *start);
  Token lexIdentifier(const char *start);
  Token lexString(const char *start);
  void skipSpaceAndComments();

  llvm::StringRef buffer;
  const char *cur;
  Diagnostics &diags;
  int nesting = 0;            // open ( and [; newlines inside are ignored
  bool lastWasNewline = true; // collapse blank lines, none at the start
  TokenKind lastKind = TokenKind::Newline;
};

} // namespace mnemo

#endif // MNEMO_FRONTEND_LEXER_H
