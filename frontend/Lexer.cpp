//===- Lexer.cpp - Tokens of the Mnemo language ---------------------------===//

#include "frontend/Lexer.h"
#include "frontend/Diagnostics.h"

#include "llvm/ADT/StringSwitch.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

using namespace mnemo;

const char *mnemo::spell(TokenKind kind) {
  switch (kind) {
#define TOKEN(Name, Description)                                               \
  case TokenKind::Name:                                                        \
    return Description;
#include "frontend/TokenKinds.def"
  }
  return "a token";
}

bool mnemo::startsStatement(TokenKind kind) {
  switch (kind) {
  case TokenKind::KwLet:
  case TokenKind::KwParam:
  case TokenKind::KwBuffer:
  case TokenKind::KwInput:
  case TokenKind::KwTarget:
  case TokenKind::KwForward:
  case TokenKind::KwTrain:
  case TokenKind::KwReturn:
  case TokenKind::KwModel:
  case TokenKind::KwLayer:
  case TokenKind::KwImport:
    return true;
  default:
    return false;
  }
}

Lexer::Lexer(llvm::StringRef buffer, Diagnostics &diags)
    : buffer(buffer), cur(buffer.begin()), diags(diags) {}

Token Lexer::make(TokenKind kind, const char *start) {
  Token tok;
  tok.kind = kind;
  tok.text = llvm::StringRef(start, cur - start);
  lastWasNewline = kind == TokenKind::Newline;
  lastKind = kind;
  return tok;
}

void Lexer::skipSpaceAndComments() {
  while (cur < buffer.end()) {
    char c = *cur;
    if (c == ' ' || c == '\t' || c == '\r') {
      ++cur;
    } else if (c == '#') {
      while (cur < buffer.end() && *cur != '\n')
        ++cur;
    } else if (c == '\n' && (nesting > 0 || lastWasNewline)) {
      ++cur; // insignificant newline
    } else {
      return;
    }
  }
}

static bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool isDigit(char c) { return c >= '0' && c <= '9'; }
static bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

Token Lexer::next() {
  skipSpaceAndComments();
  const char *start = cur;
  if (cur >= buffer.end()) {
    // End every file with a newline so the last statement is terminated.
    if (!lastWasNewline)
      return make(TokenKind::Newline, start);
    return make(TokenKind::Eof, start);
  }
  char c = *cur++;
  if (c == '\n')
    return make(TokenKind::Newline, start);
  if (isIdentStart(c))
    return lexIdentifier(start);
  // `.5` is a number, but in `blocks.3` the dot follows a name: a member.
  bool afterOperand =
      lastKind == TokenKind::Identifier || lastKind == TokenKind::Integer ||
      lastKind == TokenKind::RParen || lastKind == TokenKind::RBracket;
  if (isDigit(c) ||
      (c == '.' && !afterOperand && cur < buffer.end() && isDigit(*cur)))
    return lexNumber(start);
  if (c == '"')
    return lexString(start);

  // Punctuation and operators: the longest of TokenKinds.def's spellings
  // that the source continues with ('**' before '*').
  llvm::StringRef rest(start, buffer.end() - start);
  TokenKind punct = TokenKind::Error;
  size_t length = 0;
#define PUNCT(Name, Spelling)                                                  \
  if (rest.starts_with(Spelling) && sizeof(Spelling) - 1 > length) {           \
    punct = TokenKind::Name;                                                   \
    length = sizeof(Spelling) - 1;                                             \
  }
#include "frontend/TokenKinds.def"
  if (length) {
    cur = start + length;
    // Newlines inside parentheses and brackets do not end a statement.
    if (punct == TokenKind::LParen || punct == TokenKind::LBracket)
      ++nesting;
    if ((punct == TokenKind::RParen || punct == TokenKind::RBracket) &&
        nesting > 0)
      --nesting;
    return make(punct, start);
  }
  // Consume a whole UTF-8 sequence so the caret points at one character.
  while (cur < buffer.end() &&
         (static_cast<unsigned char>(*cur) & 0xC0) == 0x80)
    ++cur;
  Token tok = make(TokenKind::Error, start);
  if (static_cast<unsigned char>(c) >= 0x20 &&
      static_cast<unsigned char>(c) < 0x7f)
    diags.error(tok.loc(),
                llvm::Twine("unexpected character '") + llvm::Twine(c) + "'");
  else
    diags.error(tok.loc(), "unexpected character in the source");
  return tok;
}

Token Lexer::lexIdentifier(const char *start) {
  while (cur < buffer.end() && isIdentChar(*cur))
    ++cur;
  // A name template, `weight_ih_l{k}`: `{name}` right after the name's
  // characters (no space between) is part of the name, to be filled in
  // with a compile-time integer (a `for` loop's index). `if flag {` has a
  // space; a brace group that is not one name is a block.
  while (cur < buffer.end() && *cur == '{') {
    const char *p = cur + 1;
    if (p >= buffer.end() || !isIdentStart(*p))
      break;
    while (p < buffer.end() && isIdentChar(*p))
      ++p;
    if (p >= buffer.end() || *p != '}')
      break;
    cur = p + 1;
    while (cur < buffer.end() && isIdentChar(*cur))
      ++cur;
  }
  llvm::StringRef text(start, cur - start);
  TokenKind kind = llvm::StringSwitch<TokenKind>(text)
#define KEYWORD(Name, Spelling) .Case(Spelling, TokenKind::Kw##Name)
#include "frontend/TokenKinds.def"
                       .Default(TokenKind::Identifier);
  // These only start statements, never appear inside brackets: an unclosed
  // bracket before one is an error, and newlines must count again so the
  // parser can recover at the end of the statement.
  if (startsStatement(kind))
    nesting = 0;
  return make(kind, start);
}

/// Bytes in one unit of a size suffix, or 0 if `unit` is not one.
static int64_t unitBytes(llvm::StringRef unit) {
  return llvm::StringSwitch<int64_t>(unit)
      .Case("B", 1)
      .Case("KB", 1000)
      .Case("MB", 1000 * 1000)
      .Case("GB", int64_t(1000) * 1000 * 1000)
      .Case("TB", int64_t(1000) * 1000 * 1000 * 1000)
      .Case("KiB", int64_t(1) << 10)
      .Case("MiB", int64_t(1) << 20)
      .Case("GiB", int64_t(1) << 30)
      .Case("TiB", int64_t(1) << 40)
      .Default(0);
}

Token Lexer::lexNumber(const char *start) {
  bool isFloat = false;
  while (cur < buffer.end() && isDigit(*cur))
    ++cur;
  // A fraction needs a digit after the dot: `blocks.3.attn` keeps `3` an
  // integer, `0.5` and `.5` are floats.
  if (cur + 1 < buffer.end() && *cur == '.' && isDigit(cur[1])) {
    isFloat = true;
    ++cur;
    while (cur < buffer.end() && isDigit(*cur))
      ++cur;
  } else if (*start == '.') {
    isFloat = true;
    while (cur < buffer.end() && isDigit(*cur))
      ++cur;
  }
  // An exponent: e, optional sign, digits.
  if (cur < buffer.end() && (*cur == 'e' || *cur == 'E')) {
    const char *p = cur + 1;
    if (p < buffer.end() && (*p == '+' || *p == '-'))
      ++p;
    if (p < buffer.end() && isDigit(*p)) {
      isFloat = true;
      cur = p;
      while (cur < buffer.end() && isDigit(*cur))
        ++cur;
    }
  }
  llvm::StringRef digits(start, cur - start);
  // A unit suffix directly after an integer makes a size: 512MiB.
  const char *suffixStart = cur;
  while (cur < buffer.end() && isIdentChar(*cur))
    ++cur;
  llvm::StringRef suffix(suffixStart, cur - suffixStart);

  Token tok = make(TokenKind::Float, start);
  std::string text = digits.str();
  if (isFloat) {
    errno = 0;
    tok.floatValue = std::strtod(text.c_str(), nullptr);
    // Errors in numbers still yield a number, so the parser does not
    // report a second, confusing error for the same mistake.
    if (errno == ERANGE && std::isinf(tok.floatValue)) {
      diags.error(tok.loc(),
                  "number literal is too large (a double holds at most "
                  "1.8e308)",
                  {llvm::SMRange(tok.loc(), llvm::SMLoc::getFromPointer(cur))});
      tok.floatValue = 0;
    } else if (errno == ERANGE && tok.floatValue == 0 &&
               digits.find_first_of("123456789") < digits.find_first_of("eE")) {
      diags.error(tok.loc(),
                  "number literal is too small: a double holds no nonzero "
                  "value below 4.9e-324, so it would be 0",
                  {llvm::SMRange(tok.loc(), llvm::SMLoc::getFromPointer(cur))});
    }
    if (!suffix.empty())
      diags.error(llvm::SMLoc::getFromPointer(suffixStart),
                  "a size must be a whole number of units, as in 512MiB");
    return tok;
  }
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE ||
      value > uint64_t(std::numeric_limits<int64_t>::max())) {
    diags.error(tok.loc(), "integer literal is too large", {tok.range()});
    tok.kind = TokenKind::Integer;
    return tok;
  }
  tok.intValue = int64_t(value);
  tok.floatValue = double(value);
  tok.kind = TokenKind::Integer;
  if (suffix.empty())
    return tok;
  int64_t unit = unitBytes(suffix);
  if (unit == 0) {
    diags.error(llvm::SMLoc::getFromPointer(suffixStart),
                "unknown size unit '" + suffix +
                    "'; use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB");
    return tok;
  }
  if (tok.intValue > std::numeric_limits<int64_t>::max() / unit) {
    diags.error(tok.loc(), "size is too large", {tok.range()});
    return tok;
  }
  tok.kind = TokenKind::Size;
  tok.intValue *= unit;
  return tok;
}

Token Lexer::lexString(const char *start) {
  std::string value;
  while (cur < buffer.end() && *cur != '"' && *cur != '\n') {
    if (*cur == '\\' && cur + 1 < buffer.end() && cur[1] != '\n') {
      ++cur;
      value += *cur == 'n' ? '\n' : *cur == 't' ? '\t' : *cur;
      ++cur;
      continue;
    }
    value += *cur++;
  }
  if (cur >= buffer.end() || *cur != '"') {
    Token tok = make(TokenKind::Error, start);
    diags.error(tok.loc(), "unterminated string");
    return tok;
  }
  ++cur;
  Token tok = make(TokenKind::String, start);
  tok.stringValue = std::move(value);
  return tok;
}
