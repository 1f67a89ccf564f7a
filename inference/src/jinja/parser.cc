#include "jinja/parser.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "jinja/expression_parser.h"

namespace flotilla::inference::jinja {
namespace {

// The statements: text, {{ output }}, and the block tags, each block read up to its end tag.
class StatementParser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  absl::StatusOr<Body> Template() {
    std::string hit;
    ASSIGN_OR_RETURN(Body body, ParseBody(0, {}, &hit));
    return body;
  }

 private:
  // Statements up to a block tag named in `ends` (consumed up to and including its name,
  // returned in *hit); an empty `ends` reads to the end of the template. `start_line` is the
  // line of the statement that opened the block, for the error when its end is missing.
  absl::StatusOr<Body> ParseBody(int start_line, const std::vector<std::string>& ends, std::string* hit) {
    NestingGuard guard(*this);
    RETURN_IF_ERROR(guard.status());
    Body body;
    while (true) {
      const Token& tok = Cur();
      if (tok.kind == K::kEof) {
        if (ends.empty()) return body;
        return Error(absl::StrCat("unexpected end of template; the block opened at line ", start_line,
                                  " wants '", ends.back(), "'"));
      }
      if (tok.kind == K::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        Next();
      } else if (tok.kind == K::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = tok.line;
        Next();
        ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
        if (Cur().kind != K::kVarEnd) return Error(absl::StrCat("expected end of print statement, got ", Describe()));
        Next();
        body.push_back(std::move(s));
      } else if (tok.kind == K::kBlockBegin) {
        const Token& word = Peek();
        if (word.kind == K::kName && std::find(ends.begin(), ends.end(), word.text) != ends.end()) {
          Next();
          *hit = Cur().text;
          Next();
          return body;
        }
        Next();
        ASSIGN_OR_RETURN(std::unique_ptr<Stmt> s, ParseStatement());
        body.push_back(std::move(s));
      } else {
        return Error(absl::StrCat("unexpected ", Describe()));
      }
    }
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseStatement() {
    if (Cur().kind != K::kName) return Error(absl::StrCat("expected a statement name, got ", Describe()));
    std::string word = Cur().text;
    auto s = std::make_unique<Stmt>();
    s->line = Cur().line;
    Next();
    std::string hit;
    if (word == "if") {
      s->kind = Stmt::Kind::kIf;
      while (true) {
        ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false));
        RETURN_IF_ERROR(ExpectBlockEnd());
        ASSIGN_OR_RETURN(Body body, ParseBody(s->line, {"elif", "else", "endif"}, &hit));
        s->conditions.push_back(std::move(cond));
        s->bodies.push_back(std::move(body));
        if (hit == "elif") continue;
        if (hit == "else") {
          RETURN_IF_ERROR(ExpectBlockEnd());
          ASSIGN_OR_RETURN(s->else_body, ParseBody(s->line, {"endif"}, &hit));
        }
        break;
      }
    } else if (word == "for") {
      s->kind = Stmt::Kind::kFor;
      ASSIGN_OR_RETURN(s->target, ParseTarget(false));
      if (!IsName("in")) return Error(absl::StrCat("expected 'in', got ", Describe()));
      Next();
      ASSIGN_OR_RETURN(s->expr, ParseTuple(false));
      if (IsName("if")) {
        Next();
        ASSIGN_OR_RETURN(s->condition, ParseExpression(true));
      }
      if (IsName("recursive")) return Error("recursive for loops are not supported");
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(Body body, ParseBody(s->line, {"else", "endfor"}, &hit));
      s->bodies.push_back(std::move(body));
      if (hit == "else") {
        RETURN_IF_ERROR(ExpectBlockEnd());
        ASSIGN_OR_RETURN(s->else_body, ParseBody(s->line, {"endfor"}, &hit));
      }
    } else if (word == "set") {
      ASSIGN_OR_RETURN(s->target, ParseTarget(true));
      if (IsOp("=")) {
        Next();
        s->kind = Stmt::Kind::kSet;
        ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
      } else {
        s->kind = Stmt::Kind::kSetBlock;
        if (s->target.names.size() != 1 || !s->target.attribute.empty()) {
          return Error("a block set assigns to one name");
        }
        ASSIGN_OR_RETURN(s->expr, ParseFilterChain(nullptr));
        RETURN_IF_ERROR(ExpectBlockEnd());
        ASSIGN_OR_RETURN(Body body, ParseBody(s->line, {"endset"}, &hit));
        s->bodies.push_back(std::move(body));
      }
    } else if (word == "macro") {
      s->kind = Stmt::Kind::kMacro;
      ASSIGN_OR_RETURN(s->name, ExpectName());
      ASSIGN_OR_RETURN(s->params, ParseParams());
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(Body body, ParseBody(s->line, {"endmacro"}, &hit));
      s->bodies.push_back(std::move(body));
    } else if (word == "call") {
      s->kind = Stmt::Kind::kCallBlock;
      if (IsOp("(")) {
        ASSIGN_OR_RETURN(s->params, ParseParams());
      }
      ASSIGN_OR_RETURN(s->expr, ParseExpression(true));
      if (s->expr->kind != Expr::Kind::kCall) return Error("expected a call after 'call'");
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(Body body, ParseBody(s->line, {"endcall"}, &hit));
      s->bodies.push_back(std::move(body));
    } else if (word == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      ASSIGN_OR_RETURN(s->expr, ParseFilter(nullptr));
      ASSIGN_OR_RETURN(s->expr, ParseFilterChain(std::move(s->expr)));
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(Body body, ParseBody(s->line, {"endfilter"}, &hit));
      s->bodies.push_back(std::move(body));
    } else if (word == "generation") {
      s->kind = Stmt::Kind::kScope;
      RETURN_IF_ERROR(ExpectBlockEnd());
      ASSIGN_OR_RETURN(Body body, ParseBody(s->line, {"endgeneration"}, &hit));
      s->bodies.push_back(std::move(body));
    } else if (word == "break" || word == "continue") {
      s->kind = word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    } else {
      pos_--;
      return Error(absl::StrCat("unknown or unsupported statement '", word, "'"));
    }
    // The %} of a one-tag statement, or of the block's end tag.
    RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }

  absl::StatusOr<Target> ParseTarget(bool allow_attribute) {
    Target target;
    bool paren = IsOp("(");
    if (paren) Next();
    while (true) {
      ASSIGN_OR_RETURN(std::string n, ExpectName());
      target.names.push_back(n);
      if (allow_attribute && IsOp(".") && target.names.size() == 1) {
        Next();
        ASSIGN_OR_RETURN(target.attribute, ExpectName());
        return target;
      }
      if (!IsOp(",")) break;
      target.tuple = true;
      Next();
      if (Cur().kind != K::kName) break;
    }
    if (paren) RETURN_IF_ERROR(ExpectOp(")"));
    return target;
  }

  absl::StatusOr<std::vector<MacroParam>> ParseParams() {
    std::vector<MacroParam> params;
    RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!params.empty()) RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
      MacroParam p;
      ASSIGN_OR_RETURN(p.name, ExpectName());
      if (IsOp("=")) {
        Next();
        ASSIGN_OR_RETURN(p.default_value, ParseExpression(true));
      }
      params.push_back(std::move(p));
    }
    Next();
    return params;
  }
};

}  // namespace

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens, std::string_view name) {
  return StatementParser(tokens, name).Template();
}

}  // namespace flotilla::inference::jinja
