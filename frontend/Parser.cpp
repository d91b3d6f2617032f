//===- Parser.cpp - Recursive-descent parser for Mnemo --------------------===//

#include "frontend/Parser.h"
#include "frontend/Diagnostics.h"

#include "llvm/Support/MemoryBuffer.h"

using namespace mnemo;
using llvm::SMLoc;
using llvm::SMRange;

namespace {
/// Leaves the level of nesting that Parser::enterNesting entered. Counting
/// nesting makes pathological input end in an error, not a stack overflow.
struct NestingGuard {
  explicit NestingGuard(int &depth) : depth(depth) {}
  ~NestingGuard() { --depth; }
  int &depth;
};

/// A chain such as a+b+c+... or a.b.c... nests the tree one level per link;
/// each link counts as nesting until the chain's parse function returns.
struct ChainGuard {
  ChainGuard(int &depth) : depth(depth), start(depth) {}
  ~ChainGuard() { depth = start; }
  int &depth;
  int start;
};
} // namespace

Parser::Parser(unsigned bufferId, Diagnostics &diags)
    : diags(diags),
      lexer(diags.getSourceMgr().getMemoryBuffer(bufferId)->getBuffer(),
            diags) {
  prevEnd = diags.getSourceMgr().getMemoryBuffer(bufferId)->getBufferStart();
  advance();
}

std::unique_ptr<Module> mnemo::parseBuffer(unsigned bufferId,
                                           Diagnostics &diags) {
  Parser parser(bufferId, diags);
  return parser.parseModule();
}

//===----------------------------------------------------------------------===//
// Tokens
//===----------------------------------------------------------------------===//

void Parser::advance() {
  if (!tok.text.empty())
    prevEnd = tok.text.data() + tok.text.size();
  // Invalid characters were diagnosed by the lexer; skip them.
  do {
    tok = lexer.next();
  } while (tok.is(TokenKind::Error));
}

bool Parser::consumeIf(TokenKind kind) {
  if (!tok.is(kind))
    return false;
  advance();
  return true;
}

Parser::ParseFailed Parser::errorAtCurrent(const llvm::Twine &message) {
  diags.error(tok.loc(), message,
              tok.is(TokenKind::Newline)
                  ? llvm::ArrayRef<SMRange>{}
                  : llvm::ArrayRef<SMRange>{tok.range()});
  return {};
}

std::optional<Parser::Name> Parser::expectName(const llvm::Twine &what) {
  if (!tok.is(TokenKind::Identifier)) {
    errorAtCurrent("expected " + what + ", found " + spell(tok.kind));
    return std::nullopt;
  }
  Name name{tok.text.str(), tok.range()};
  advance();
  return name;
}

bool Parser::expect(TokenKind kind, const char *context) {
  if (consumeIf(kind))
    return true;
  errorAtCurrent(llvm::Twine("expected ") + spell(kind) + " " + context +
                 ", found " + spell(tok.kind));
  return false;
}

SMRange Parser::rangeFrom(SMLoc start) const {
  return {start, SMLoc::getFromPointer(prevEnd)};
}

void Parser::skipNewlines() {
  while (tok.is(TokenKind::Newline) || tok.is(TokenKind::Semicolon))
    advance();
}

bool Parser::endOfStatement() {
  if (tok.is(TokenKind::Newline) || tok.is(TokenKind::Semicolon)) {
    advance();
    return true;
  }
  if (tok.is(TokenKind::RBrace) || tok.is(TokenKind::Eof))
    return true;
  errorAtCurrent(llvm::Twine("expected the end of the statement, found ") +
                 spell(tok.kind));
  skipToStatementEnd();
  return false;
}

void Parser::skipToStatementEnd() {
  int braces = 0;
  while (!tok.is(TokenKind::Eof)) {
    if (braces == 0 && startsStatement(tok.kind))
      return; // resume at the next statement
    if (tok.is(TokenKind::LBrace)) {
      ++braces;
    } else if (tok.is(TokenKind::RBrace)) {
      if (braces == 0)
        return; // the enclosing block's end
      --braces;
    } else if (braces == 0 &&
               (tok.is(TokenKind::Newline) || tok.is(TokenKind::Semicolon))) {
      advance();
      return;
    }
    advance();
  }
}

//===----------------------------------------------------------------------===//
// Top level
//===----------------------------------------------------------------------===//

/// module ::= (import | definition)*
StmtPtr Parser::parseDirectiveOnly() {
  if (!tok.is(TokenKind::KwPrune) && !tok.is(TokenKind::KwQuantize))
    return errorAtCurrent("expected 'prune' or 'quantize'");
  StmtPtr directive = parseTrainSetting();
  skipNewlines();
  if (directive && !tok.is(TokenKind::Eof))
    return errorAtCurrent(
        llvm::Twine("expected the end of the directive, found ") +
        spell(tok.kind));
  return directive;
}

std::unique_ptr<Module> Parser::parseModule() {
  auto module = std::make_unique<Module>();
  skipNewlines();
  while (!tok.is(TokenKind::Eof)) {
    if (tok.is(TokenKind::KwImport)) {
      parseImport(*module);
    } else if (tok.is(TokenKind::KwLayer) || tok.is(TokenKind::KwModel)) {
      if (auto def = parseDefinition())
        module->definitions.push_back(std::move(def));
    } else {
      errorAtCurrent(llvm::Twine("expected 'import', 'layer' or 'model' at the "
                                 "top level, found ") +
                     spell(tok.kind));
      // Resynchronize at the next top-level keyword.
      advance();
      while (!tok.is(TokenKind::Eof) && !tok.is(TokenKind::KwImport) &&
             !tok.is(TokenKind::KwLayer) && !tok.is(TokenKind::KwModel))
        advance();
    }
    skipNewlines();
  }
  return module;
}

/// import ::= 'import' NAME ('.' NAME)*
void Parser::parseImport(Module &module) {
  advance(); // import
  SMLoc start = tok.loc();
  Import import;
  auto first = expectName("a module name after 'import'");
  if (!first) {
    skipToStatementEnd();
    return;
  }
  import.path = first->text;
  while (consumeIf(TokenKind::Dot)) {
    if (!tok.is(TokenKind::Identifier)) {
      errorAtCurrent("expected a name after '.' in the import path");
      skipToStatementEnd();
      return;
    }
    import.path += "." + tok.text.str();
    advance();
  }
  import.range = rangeFrom(start);
  module.imports.push_back(std::move(import));
  endOfStatement();
}

/// definition ::= ('layer' | 'model') NAME '(' hyperparams? ')' block
std::unique_ptr<Definition> Parser::parseDefinition() {
  auto def = std::make_unique<Definition>();
  def->isModel = tok.is(TokenKind::KwModel);
  const char *what = def->isModel ? "model" : "layer";
  advance();
  auto name = expectName(llvm::Twine("a name after '") + what + "'");
  if (!name) {
    skipToStatementEnd();
    return nullptr;
  }
  def->name = name->text;
  def->nameRange = name->range;
  if (tok.is(TokenKind::LParen) && !parseHyperParams(*def)) {
    skipToStatementEnd();
    if (!tok.is(TokenKind::LBrace))
      return nullptr;
  }
  if (!tok.is(TokenKind::LBrace))
    return errorAtCurrent(llvm::Twine("expected '{' to begin the body of ") +
                          what + " '" + def->name + "', found " +
                          spell(tok.kind));
  parseBlock(def->body);
  return def;
}

/// hyperparams ::= '(' (NAME ('=' expr)? (',' NAME ('=' expr)?)*)? ')'
bool Parser::parseHyperParams(Definition &def) {
  advance(); // (
  if (consumeIf(TokenKind::RParen))
    return true;
  do {
    auto name = expectName("a hyper-parameter name");
    if (!name)
      return false;
    HyperParam hp;
    hp.name = name->text;
    hp.range = name->range;
    if (consumeIf(TokenKind::Assign)) {
      hp.defaultValue = parseExpr();
      if (!hp.defaultValue)
        return false;
    }
    def.hyperParams.push_back(std::move(hp));
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RParen, "after the hyper-parameters");
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

/// block ::= '{' statement* '}'
bool Parser::parseBlock(Block &block, bool isTrain) {
  if (!enterNesting())
    return false;
  NestingGuard guard(nesting);
  if (!expect(TokenKind::LBrace, "to begin a block"))
    return false;
  skipNewlines();
  while (!tok.is(TokenKind::RBrace) && !tok.is(TokenKind::Eof)) {
    const char *before = tok.text.data();
    StmtPtr stmt = isTrain ? parseTrainSetting() : parseStatement();
    if (stmt) {
      block.push_back(std::move(stmt));
      endOfStatement();
    } else {
      skipToStatementEnd();
      // Recovery must make progress, or a token that no statement accepts
      // here (such as 'let' in a train section) would loop forever.
      if (tok.text.data() == before)
        advance();
    }
    skipNewlines();
  }
  return expect(TokenKind::RBrace, "to end the block");
}

/// statement ::= 'let' names '=' expr | names '=' expr
///             | 'return' expr (',' expr)*
///             | 'if' expr block ('else' (block | if))?
///             | ('param' | 'buffer') NAME ':' type ('=' expr)?
///             | ('input' | 'target') NAME ':' type
///             | 'forward' ('(' names ')')? block
///             | 'train' '{' setting* '}'
StmtPtr Parser::parseStatement() {
  SMLoc start = tok.loc();
  switch (tok.kind) {
  case TokenKind::KwLet:
  case TokenKind::Identifier: {
    bool isLet = consumeIf(TokenKind::KwLet);
    auto name = expectName("a name after 'let'");
    if (!name)
      return nullptr;
    if (!isLet && (tok.is(TokenKind::LParen) || tok.is(TokenKind::Dot))) {
      // An expression statement: only a call makes sense on its own.
      ExprPtr expr = parsePostfixFrom(
          std::make_unique<NameExpr>(name->range, name->text), start);
      if (!expr)
        return nullptr;
      if (!llvm::isa<CallExpr>(expr.get())) {
        diags.error(expr->loc(),
                    "this expression does nothing; did you mean 'let x = ...'?",
                    {expr->getRange()});
        return nullptr;
      }
      return std::make_unique<ExprStmt>(start, std::move(expr));
    }
    // let a, b = ...: a tuple's values.
    std::vector<std::pair<std::string, SMRange>> moreNames;
    while (consumeIf(TokenKind::Comma)) {
      auto more = expectName("a name after ','");
      if (!more)
        return nullptr;
      moreNames.push_back({more->text, more->range});
    }
    if (!tok.is(TokenKind::Assign))
      return errorAtCurrent(llvm::Twine("expected '=' after '") + name->text +
                            "' (statements are 'let x = ...', 'x = ...' or "
                            "'return ...'), found " +
                            spell(tok.kind));
    advance();
    ExprPtr value = parseExpr();
    if (!value)
      return nullptr;
    auto bind = std::make_unique<BindStmt>(
        isLet ? Stmt::Kind::Let : Stmt::Kind::Assign, start,
        std::move(name->text), name->range, std::move(value));
    bind->moreNames = std::move(moreNames);
    return bind;
  }
  case TokenKind::KwReturn: {
    advance();
    ExprPtr value = parseExpr();
    if (!value)
      return nullptr;
    // return a, b: a tuple, which is a list.
    if (tok.is(TokenKind::Comma)) {
      std::vector<ExprPtr> values;
      values.push_back(std::move(value));
      while (consumeIf(TokenKind::Comma)) {
        if (!(value = parseExpr()))
          return nullptr;
        values.push_back(std::move(value));
      }
      SMLoc first = values.front()->getRange().Start;
      value = std::make_unique<ListExpr>(rangeFrom(first), std::move(values));
    }
    return std::make_unique<ReturnStmt>(start, std::move(value));
  }
  case TokenKind::KwIf:
    return parseIf();
  case TokenKind::KwFor: {
    // for ::= 'for' name 'in' expr '..' expr block
    advance();
    if (!tok.is(TokenKind::Identifier))
      return errorAtCurrent("expected the loop's index name after 'for'");
    std::string index = tok.text.str();
    SMRange indexRange = tok.range();
    advance();
    if (!tok.is(TokenKind::Identifier) || tok.text != "in")
      return errorAtCurrent("expected 'in' after the loop's index name");
    advance();
    ExprPtr first = parseExpr();
    if (!first ||
        !expect(TokenKind::DotDot, "between the range's start and end"))
      return nullptr;
    ExprPtr last = parseExpr();
    if (!last)
      return nullptr;
    Block body;
    if (!parseBlock(body))
      return nullptr;
    return std::make_unique<ForStmt>(start, std::move(index), indexRange,
                                     std::move(first), std::move(last),
                                     std::move(body));
  }
  case TokenKind::KwCheckpoint: {
    // checkpoint ::= 'checkpoint' block
    advance();
    Block body;
    if (!parseBlock(body))
      return nullptr;
    return std::make_unique<CheckpointStmt>(start, std::move(body));
  }
  case TokenKind::KwParam:
  case TokenKind::KwBuffer: {
    bool isBuffer = tok.is(TokenKind::KwBuffer);
    advance();
    auto name = expectName(isBuffer ? "a buffer name after 'buffer'"
                                    : "a parameter name after 'param'");
    if (!name)
      return nullptr;
    TypeSpec type;
    if (!expect(TokenKind::Colon,
                isBuffer ? "and a type after the buffer name"
                         : "and a type after the parameter name") ||
        !parseType(type))
      return nullptr;
    ExprPtr init;
    if (consumeIf(TokenKind::Assign) && !(init = parseExpr()))
      return nullptr;
    return std::make_unique<ParamStmt>(start, std::move(name->text),
                                       name->range, std::move(type),
                                       std::move(init), isBuffer);
  }
  case TokenKind::KwInput:
  case TokenKind::KwTarget: {
    bool isTarget = tok.is(TokenKind::KwTarget);
    advance();
    auto name =
        expectName(isTarget ? "a name after 'target'" : "a name after 'input'");
    if (!name)
      return nullptr;
    TypeSpec type;
    if (!expect(TokenKind::Colon, "and a type after the name") ||
        !parseType(type))
      return nullptr;
    return std::make_unique<DataStmt>(start, isTarget, std::move(name->text),
                                      name->range, std::move(type));
  }
  case TokenKind::KwForward:
    return parseForward();
  case TokenKind::KwTrain:
    return parseTrain();
  default:
    return errorAtCurrent(llvm::Twine("expected a statement, found ") +
                          spell(tok.kind));
  }
}

/// if ::= 'if' expr block ('else' (block | if))?
StmtPtr Parser::parseIf() {
  SMLoc start = tok.loc();
  advance(); // if
  ExprPtr cond = parseExpr();
  if (!cond)
    return nullptr;
  Block thenBlock, elseBlock;
  if (!parseBlock(thenBlock))
    return nullptr;
  if (consumeIf(TokenKind::KwElse)) {
    if (tok.is(TokenKind::KwIf)) {
      StmtPtr nested = parseIf();
      if (!nested)
        return nullptr;
      elseBlock.push_back(std::move(nested));
    } else if (!parseBlock(elseBlock)) {
      return nullptr;
    }
  }
  return std::make_unique<IfStmt>(start, std::move(cond), std::move(thenBlock),
                                  std::move(elseBlock));
}

/// forward ::= 'forward' ('(' (NAME (',' NAME)*)? ')')? block
StmtPtr Parser::parseForward() {
  SMLoc start = tok.loc();
  advance(); // forward
  std::vector<std::pair<std::string, SMRange>> params;
  if (consumeIf(TokenKind::LParen)) {
    if (!tok.is(TokenKind::RParen)) {
      do {
        auto name = expectName("an argument name");
        if (!name)
          return nullptr;
        params.emplace_back(name->text, name->range);
      } while (consumeIf(TokenKind::Comma));
    }
    if (!expect(TokenKind::RParen, "after the forward arguments"))
      return nullptr;
  }
  Block body;
  if (!parseBlock(body))
    return nullptr;
  return std::make_unique<ForwardStmt>(start, std::move(params),
                                       std::move(body));
}

/// train ::= 'train' '{' (NAME '=' expr | ('prune' | 'quantize') pattern '='
/// expr)* '}'
StmtPtr Parser::parseTrain() {
  SMLoc start = tok.loc();
  advance(); // train
  Block settings;
  if (!parseBlock(settings, /*isTrain=*/true))
    return nullptr;
  return std::make_unique<TrainStmt>(start, std::move(settings));
}

StmtPtr Parser::parseTrainSetting() {
  SMLoc start = tok.loc();
  if (tok.is(TokenKind::KwPrune) || tok.is(TokenKind::KwQuantize)) {
    bool isPrune = tok.is(TokenKind::KwPrune);
    advance();
    std::string pattern;
    SMRange patternRange;
    if (!parseDirectivePattern(pattern, patternRange) ||
        !expect(TokenKind::Assign, "after the parameter pattern"))
      return nullptr;
    ExprPtr value = parseExpr();
    if (!value)
      return nullptr;
    return std::make_unique<DirectiveStmt>(start, isPrune, std::move(pattern),
                                           patternRange, std::move(value));
  }
  auto name = expectName("a setting ('name = value'), 'prune' or 'quantize' "
                         "in the train section");
  if (!name)
    return nullptr;
  if (!expect(TokenKind::Assign, "after the setting name"))
    return nullptr;
  ExprPtr value = parseExpr();
  if (!value)
    return nullptr;
  return std::make_unique<BindStmt>(Stmt::Kind::Assign, start,
                                    std::move(name->text), name->range,
                                    std::move(value));
}

/// pattern ::= part ('.' part)*   part ::= NAME | INTEGER | '*'
bool Parser::parseDirectivePattern(std::string &pattern, SMRange &range) {
  SMLoc start = tok.loc();
  do {
    if (!pattern.empty())
      pattern += ".";
    if (tok.is(TokenKind::Identifier) || tok.is(TokenKind::Integer) ||
        tok.is(TokenKind::Star)) {
      pattern += tok.text.str();
      advance();
    } else {
      errorAtCurrent(llvm::Twine("expected a parameter path such as "
                                 "'blocks.*.mlp.fc1.weight', found ") +
                     spell(tok.kind));
      return false;
    }
  } while (consumeIf(TokenKind::Dot));
  range = rangeFrom(start);
  return true;
}

/// type ::= NAME '[' (expr (',' expr)*)? ']'
bool Parser::parseType(TypeSpec &type) {
  SMLoc start = tok.loc();
  auto dtype = expectName("a type such as f32[128, 784]");
  if (!dtype)
    return false;
  type.dtype = dtype->text;
  type.dtypeRange = dtype->range;
  if (!expect(TokenKind::LBracket, "with the shape after the element type"))
    return false;
  if (!tok.is(TokenKind::RBracket)) {
    do {
      ExprPtr dim = parseExpr();
      if (!dim)
        return false;
      type.dims.push_back(std::move(dim));
    } while (consumeIf(TokenKind::Comma));
  }
  if (!expect(TokenKind::RBracket, "to end the shape"))
    return false;
  type.range = rangeFrom(start);
  return true;
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

bool Parser::enterNesting() {
  if (++nesting <= kMaxNesting)
    return true;
  --nesting;
  if (!tooDeep)
    errorAtCurrent("this is nested too deeply (the limit is " +
                   llvm::Twine(kMaxNesting) + " levels)");
  tooDeep = true;
  return false;
}

bool Parser::chainTooDeep() {
  // The chain's guard restores `nesting` when its parse function returns.
  return !enterNesting();
}

/// expr ::= or
ExprPtr Parser::parseExpr() {
  if (!enterNesting())
    return nullptr;
  NestingGuard guard(nesting);
  return parseBinary(0);
}

namespace {
/// The binary operators, by precedence level, loosest first. `not` sits
/// between `and` and the comparisons (see parseNot).
struct BinaryLevel {
  std::vector<std::pair<TokenKind, BinaryOp>> ops;
  bool chains; // a+b+c is fine; a < b < c is not
};
const BinaryLevel kBinaryLevels[] = {
    {{{TokenKind::KwOr, BinaryOp::Or}}, true},
    {{{TokenKind::KwAnd, BinaryOp::And}}, true},
    {{{TokenKind::EqEq, BinaryOp::Eq},
      {TokenKind::NotEq, BinaryOp::Ne},
      {TokenKind::Less, BinaryOp::Lt},
      {TokenKind::LessEq, BinaryOp::Le},
      {TokenKind::Greater, BinaryOp::Gt},
      {TokenKind::GreaterEq, BinaryOp::Ge}},
     false},
    {{{TokenKind::Plus, BinaryOp::Add}, {TokenKind::Minus, BinaryOp::Sub}},
     true},
    {{{TokenKind::Star, BinaryOp::Mul},
      {TokenKind::Slash, BinaryOp::Div},
      {TokenKind::SlashSlash, BinaryOp::FloorDiv},
      {TokenKind::Percent, BinaryOp::Mod},
      {TokenKind::At, BinaryOp::MatMul}},
     true},
};
constexpr int kComparisonLevel = 2;
constexpr int kNumBinaryLevels = 5;
} // namespace

/// or             ::= and ('or' and)*
/// and            ::= not ('and' not)*
/// comparison     ::= additive (('==' | '!=' | '<' | '<=' | '>' | '>=')
///                    additive)?
/// additive       ::= multiplicative (('+' | '-') multiplicative)*
/// multiplicative ::= unary (('*' | '/' | '//' | '%' | '@') unary)*
ExprPtr Parser::parseBinary(int level) {
  auto operand = [&]() -> ExprPtr {
    if (level + 1 == kComparisonLevel)
      return parseNot();
    if (level + 1 == kNumBinaryLevels)
      return parseUnary();
    return parseBinary(level + 1);
  };
  SMLoc start = tok.loc();
  ExprPtr lhs = operand();
  ChainGuard chain(nesting);
  const BinaryLevel &ops = kBinaryLevels[level];
  while (lhs) {
    auto match = std::find_if(ops.ops.begin(), ops.ops.end(),
                              [&](const auto &op) { return tok.is(op.first); });
    if (match == ops.ops.end())
      return lhs;
    if (chainTooDeep())
      return nullptr;
    SMLoc opLoc = tok.loc();
    advance();
    ExprPtr rhs = operand();
    if (!rhs)
      return nullptr;
    lhs = std::make_unique<BinaryExpr>(rangeFrom(start), match->second, opLoc,
                                       std::move(lhs), std::move(rhs));
    if (!ops.chains)
      return lhs;
  }
  return lhs;
}

/// not ::= 'not' not | comparison
ExprPtr Parser::parseNot() {
  if (!tok.is(TokenKind::KwNot))
    return parseBinary(kComparisonLevel);
  if (!enterNesting())
    return nullptr;
  NestingGuard guard(nesting);
  SMLoc start = tok.loc();
  advance();
  ExprPtr operand = parseNot();
  if (!operand)
    return nullptr;
  return std::make_unique<UnaryExpr>(rangeFrom(start), '!', std::move(operand));
}

/// unary ::= '-' unary | power
ExprPtr Parser::parseUnary() {
  // Every level of unary, power and parenthesis recursion passes here.
  if (!enterNesting())
    return nullptr;
  NestingGuard guard(nesting);
  if (tok.is(TokenKind::Minus)) {
    SMLoc start = tok.loc();
    advance();
    ExprPtr operand = parseUnary();
    if (!operand)
      return nullptr;
    return std::make_unique<UnaryExpr>(rangeFrom(start), '-',
                                       std::move(operand));
  }
  return parsePower();
}

/// power ::= postfix ('**' unary)?
ExprPtr Parser::parsePower() {
  SMLoc start = tok.loc();
  ExprPtr base = parsePostfix();
  if (!base || !tok.is(TokenKind::StarStar))
    return base;
  SMLoc opLoc = tok.loc();
  advance();
  ExprPtr exponent = parseUnary();
  if (!exponent)
    return nullptr;
  return std::make_unique<BinaryExpr>(rangeFrom(start), BinaryOp::Pow, opLoc,
                                      std::move(base), std::move(exponent));
}

/// postfix ::= primary ('(' arguments ')' | '.' NAME)*
ExprPtr Parser::parsePostfix() {
  SMLoc start = tok.loc();
  return parsePostfixFrom(parsePrimary(), start);
}

ExprPtr Parser::parsePostfixFrom(ExprPtr expr, SMLoc start) {
  ChainGuard chain(nesting);
  while (expr) {
    if ((tok.is(TokenKind::LParen) || tok.is(TokenKind::Dot)) && chainTooDeep())
      return nullptr;
    if (tok.is(TokenKind::LParen)) {
      std::vector<Argument> args;
      if (!parseArguments(args))
        return nullptr;
      expr = std::make_unique<CallExpr>(rangeFrom(start), std::move(expr),
                                        std::move(args));
    } else if (tok.is(TokenKind::Dot)) {
      advance();
      // Numbers are allowed so that `blocks.3` can name one repeated layer.
      if (!tok.is(TokenKind::Identifier) && !tok.is(TokenKind::Integer))
        return errorAtCurrent(
            llvm::Twine("expected a member name after '.', found ") +
            spell(tok.kind));
      std::string member = tok.text.str();
      SMLoc memberLoc = tok.loc();
      advance();
      expr = std::make_unique<MemberExpr>(rangeFrom(start), std::move(expr),
                                          std::move(member), memberLoc);
    } else {
      return expr;
    }
  }
  return expr;
}

/// arguments ::= '(' (argument (',' argument)*)? ')'
/// argument  ::= (NAME '=')? expr
bool Parser::parseArguments(std::vector<Argument> &args) {
  advance(); // (
  if (consumeIf(TokenKind::RParen))
    return true;
  do {
    if (tok.is(TokenKind::RParen))
      break; // trailing comma
    Argument arg;
    // NAME '=' is a keyword argument; look one token ahead through a copy
    // of the lexer state is not possible, so parse an expression and check.
    ExprPtr value = parseExpr();
    if (!value)
      return false;
    if (tok.is(TokenKind::Assign)) {
      auto *name = llvm::dyn_cast<NameExpr>(value.get());
      if (!name) {
        errorAtCurrent("only a plain name can be a keyword argument");
        return false;
      }
      arg.name = name->name;
      arg.nameLoc = name->loc();
      advance();
      value = parseExpr();
      if (!value)
        return false;
    }
    arg.value = std::move(value);
    args.push_back(std::move(arg));
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RParen, "to close the argument list");
}

/// primary ::= INTEGER | FLOAT | SIZE | STRING | 'true' | 'false' | NAME
///           | '(' expr ')' | '[' (expr (',' expr)*)? ']'
///           | 'repeat' expr '{' expr '}'
ExprPtr Parser::parsePrimary() {
  SMLoc start = tok.loc();
  switch (tok.kind) {
  case TokenKind::Integer: {
    auto e = std::make_unique<NumberExpr>(tok.range(), true, tok.intValue,
                                          double(tok.intValue));
    advance();
    return e;
  }
  case TokenKind::Float: {
    auto e =
        std::make_unique<NumberExpr>(tok.range(), false, 0, tok.floatValue);
    advance();
    return e;
  }
  case TokenKind::Size: {
    auto e = std::make_unique<SizeExpr>(tok.range(), tok.intValue);
    advance();
    return e;
  }
  case TokenKind::String: {
    auto e = std::make_unique<StringExpr>(tok.range(), tok.stringValue);
    advance();
    return e;
  }
  case TokenKind::KwTrue:
  case TokenKind::KwFalse: {
    auto e = std::make_unique<BoolExpr>(tok.range(), tok.is(TokenKind::KwTrue));
    advance();
    return e;
  }
  case TokenKind::Identifier: {
    auto e = std::make_unique<NameExpr>(tok.range(), tok.text.str());
    advance();
    return e;
  }
  case TokenKind::LParen: {
    advance();
    ExprPtr inner = parseExpr();
    if (!inner || !expect(TokenKind::RParen, "to close the parenthesis"))
      return nullptr;
    return inner;
  }
  case TokenKind::LBracket: {
    advance();
    std::vector<ExprPtr> elements;
    if (!tok.is(TokenKind::RBracket)) {
      do {
        if (tok.is(TokenKind::RBracket))
          break; // trailing comma
        ExprPtr element = parseExpr();
        if (!element)
          return nullptr;
        elements.push_back(std::move(element));
      } while (consumeIf(TokenKind::Comma));
    }
    if (!expect(TokenKind::RBracket, "to close the list"))
      return nullptr;
    return std::make_unique<ListExpr>(rangeFrom(start), std::move(elements));
  }
  case TokenKind::KwRepeat: {
    advance();
    ExprPtr count = parseExpr();
    if (!count)
      return nullptr;
    // repeat i in A..B: the name, then `in` (a name only here).
    std::string indexName;
    ExprPtr first;
    auto *name = llvm::dyn_cast<NameExpr>(count.get());
    if (name && tok.is(TokenKind::Identifier) && tok.text == "in") {
      indexName = name->name;
      advance();
      if (!(first = parseExpr()) ||
          !expect(TokenKind::DotDot, "between the range's start and end"))
        return nullptr;
      if (!(count = parseExpr()))
        return nullptr;
    }
    if (!expect(TokenKind::LBrace, indexName.empty()
                                       ? "after the repeat count"
                                       : "after the repeat range"))
      return nullptr;
    skipNewlines();
    ExprPtr body = parseExpr();
    if (!body)
      return nullptr;
    skipNewlines();
    if (!expect(TokenKind::RBrace, "to end the repeated layer"))
      return nullptr;
    return std::make_unique<RepeatExpr>(rangeFrom(start), std::move(count),
                                        std::move(body), std::move(indexName),
                                        std::move(first));
  }
  default:
    return errorAtCurrent(llvm::Twine("expected an expression, found ") +
                          spell(tok.kind));
  }
}
