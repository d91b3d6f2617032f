//===- LexerTest.cpp - Tokens of the Mnemo language
//------------------------===//

#include "frontend/Lexer.h"
#include "frontend/Diagnostics.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mnemo;

namespace {
struct Lexed {
  std::vector<Token> tokens;
  std::string errors;
};

Lexed lex(llvm::StringRef text) {
  Lexed out;
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, "t.mn"),
                        llvm::SMLoc());
  llvm::raw_string_ostream os(out.errors);
  Diagnostics diags(sm, os);
  Lexer lexer(sm.getMemoryBuffer(1)->getBuffer(), diags);
  for (Token t = lexer.next(); !t.is(TokenKind::Eof); t = lexer.next()) {
    t.text = llvm::StringRef(); // the buffer dies with sm
    out.tokens.push_back(t);
  }
  os.flush();
  return out;
}

std::vector<TokenKind> kinds(const Lexed &l) {
  std::vector<TokenKind> k;
  for (const Token &t : l.tokens)
    k.push_back(t.kind);
  return k;
}
} // namespace

TEST(Lexer, NumbersIdentifiersAndOperators) {
  Lexed l = lex("let x = a @ b.T ** 2 // 3 # comment\n");
  EXPECT_EQ(kinds(l),
            (std::vector<TokenKind>{
                TokenKind::KwLet, TokenKind::Identifier, TokenKind::Assign,
                TokenKind::Identifier, TokenKind::At, TokenKind::Identifier,
                TokenKind::Dot, TokenKind::Identifier, TokenKind::StarStar,
                TokenKind::Integer, TokenKind::SlashSlash, TokenKind::Integer,
                TokenKind::Newline}));
  EXPECT_TRUE(l.errors.empty());
}

TEST(Lexer, FloatsAndExponents) {
  Lexed l = lex("0.5 1e-3 .25 2E+2 7");
  ASSERT_EQ(l.tokens.size(), 6u); // five numbers and the final newline
  EXPECT_EQ(l.tokens[0].kind, TokenKind::Float);
  EXPECT_DOUBLE_EQ(l.tokens[0].floatValue, 0.5);
  EXPECT_DOUBLE_EQ(l.tokens[1].floatValue, 1e-3);
  EXPECT_DOUBLE_EQ(l.tokens[2].floatValue, 0.25);
  EXPECT_DOUBLE_EQ(l.tokens[3].floatValue, 200);
  EXPECT_EQ(l.tokens[4].kind, TokenKind::Integer);
  EXPECT_EQ(l.tokens[4].intValue, 7);
}

TEST(Lexer, DottedPathsKeepIntegers) {
  // blocks.3.attn: the 3 is an integer member, not the float 3.
  Lexed l = lex("blocks.3.attn");
  EXPECT_EQ(kinds(l),
            (std::vector<TokenKind>{
                TokenKind::Identifier, TokenKind::Dot, TokenKind::Integer,
                TokenKind::Dot, TokenKind::Identifier, TokenKind::Newline}));
}

TEST(Lexer, SizesInBytes) {
  Lexed l = lex("512MiB 2GB 16B");
  ASSERT_GE(l.tokens.size(), 3u);
  EXPECT_EQ(l.tokens[0].kind, TokenKind::Size);
  EXPECT_EQ(l.tokens[0].intValue, 512ll << 20);
  EXPECT_EQ(l.tokens[1].intValue, 2000000000ll);
  EXPECT_EQ(l.tokens[2].intValue, 16);
}

TEST(Lexer, BadUnitAndHugeIntegerAreErrors) {
  Lexed l = lex("512Mb 99999999999999999999999");
  EXPECT_NE(l.errors.find("unknown size unit 'Mb'"), std::string::npos)
      << l.errors;
  EXPECT_NE(l.errors.find("integer literal is too large"), std::string::npos)
      << l.errors;
}

TEST(Lexer, NewlinesInsideBracketsAreIgnored) {
  Lexed l = lex("f(a,\n  b)\n\n\nx");
  EXPECT_EQ(kinds(l),
            (std::vector<TokenKind>{TokenKind::Identifier, TokenKind::LParen,
                                    TokenKind::Identifier, TokenKind::Comma,
                                    TokenKind::Identifier, TokenKind::RParen,
                                    TokenKind::Newline, TokenKind::Identifier,
                                    TokenKind::Newline}));
}

TEST(Lexer, ComparisonsAndKeywords) {
  Lexed l = lex("a == b != c <= d >= e < f > g and not h or i");
  EXPECT_EQ(kinds(l),
            (std::vector<TokenKind>{
                TokenKind::Identifier, TokenKind::EqEq, TokenKind::Identifier,
                TokenKind::NotEq, TokenKind::Identifier, TokenKind::LessEq,
                TokenKind::Identifier, TokenKind::GreaterEq,
                TokenKind::Identifier, TokenKind::Less, TokenKind::Identifier,
                TokenKind::Greater, TokenKind::Identifier, TokenKind::KwAnd,
                TokenKind::KwNot, TokenKind::Identifier, TokenKind::KwOr,
                TokenKind::Identifier, TokenKind::Newline}));
}

TEST(Lexer, InvalidCharactersAreReportedAndSkipped) {
  Lexed l = lex("a $ b");
  EXPECT_NE(l.errors.find("t.mn:1:3: error: unexpected character '$'"),
            std::string::npos)
      << l.errors;
}

TEST(Lexer, UnterminatedString) {
  Lexed l = lex("\"abc");
  EXPECT_NE(l.errors.find("unterminated string"), std::string::npos);
}
