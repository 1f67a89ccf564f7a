#include "jinja/parser.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::inference::jinja {
namespace {

using ExprPtr = std::unique_ptr<Expr>;
using K = Token::Kind;

ExprPtr MakeExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, std::string_view name) : t_(tokens), name_(name) {}

  absl::StatusOr<Body> Template() {
    std::string hit;
    ASSIGN_OR_RETURN(Body body, ParseBody(0, {}, &hit));
    return body;
  }

 private:
  const Token& Cur() const { return t_[pos_]; }
  const Token& Peek(size_t k = 1) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  bool IsOp(std::string_view op) const { return Cur().kind == K::kOp && Cur().text == op; }
  bool IsName(std::string_view n) const { return Cur().kind == K::kName && Cur().text == n; }
  void Next() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }

  absl::Status Error(std::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ":", Cur().line, ": ", std::string(msg)));
  }
  std::string Describe() const {
    switch (Cur().kind) {
      case K::kEof: return "end of template";
      case K::kBlockEnd: return "end of statement block";
      case K::kVarEnd: return "end of print statement";
      case K::kText: return "template data";
      default: return absl::StrCat("'", Cur().text, "'");
    }
  }
  absl::Status ExpectOp(std::string_view op) {
    if (!IsOp(op)) return Error(absl::StrCat("expected '", std::string(op), "', got ", Describe()));
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    if (Cur().kind != K::kBlockEnd) return Error(absl::StrCat("expected end of statement block, got ", Describe()));
    Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Cur().kind != K::kName) return Error(absl::StrCat("expected a name, got ", Describe()));
    std::string n = Cur().text;
    Next();
    return n;
  }

  // Statements up to a block tag named in `ends` (consumed up to and including its name,
  // returned in *hit); an empty `ends` reads to the end of the template. `start_line` is the
  // line of the statement that opened the block, for the error when its end is missing.
  absl::StatusOr<Body> ParseBody(int start_line, const std::vector<std::string>& ends, std::string* hit) {
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

  // `| f(args) | g ...` after `chain`; the innermost operand is null (a block's output).
  absl::StatusOr<ExprPtr> ParseFilterChain(ExprPtr chain) {
    while (IsOp("|")) {
      ASSIGN_OR_RETURN(chain, ParseFilter(std::move(chain)));
    }
    return chain;
  }

  // Expressions.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr) {
    int line = Cur().line;
    ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(with_condexpr));
    if (!IsOp(",")) return first;
    auto tuple = MakeExpr(Expr::Kind::kTuple, line);
    tuple->items.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Cur().kind == K::kBlockEnd || Cur().kind == K::kVarEnd || IsOp(")") || IsName("in")) break;
      ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(with_condexpr));
      tuple->items.push_back(std::move(e));
    }
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr) {
    ASSIGN_OR_RETURN(ExprPtr e, ParseOr());
    if (!with_condexpr) return e;
    while (IsName("if")) {
      int line = Cur().line;
      Next();
      auto cond = MakeExpr(Expr::Kind::kCondition, line);
      cond->items.push_back(std::move(e));
      ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
      cond->items.push_back(std::move(test));
      if (IsName("else")) {
        Next();
        ASSIGN_OR_RETURN(ExprPtr other, ParseExpression(true));
        cond->items.push_back(std::move(other));
      } else {
        cond->items.push_back(nullptr);
      }
      e = std::move(cond);
    }
    return e;
  }

  absl::StatusOr<ExprPtr> Binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right, int line) {
    auto e = MakeExpr(kind, line);
    e->name = std::move(op);
    e->items.push_back(std::move(left));
    e->items.push_back(std::move(right));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      int line = Cur().line;
      Next();
      ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      ASSIGN_OR_RETURN(left, Binary(Expr::Kind::kOr, "or", std::move(left), std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      int line = Cur().line;
      Next();
      ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      ASSIGN_OR_RETURN(left, Binary(Expr::Kind::kAnd, "and", std::move(left), std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      auto e = MakeExpr(Expr::Kind::kNot, Cur().line);
      Next();
      ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      e->items.push_back(std::move(operand));
      return e;
    }
    return ParseCompare();
  }

  // Python's chained comparisons: a < b < c is (a < b) and (b < c), b evaluated for each.
  absl::StatusOr<ExprPtr> ParseCompare() {
    int line = Cur().line;
    ASSIGN_OR_RETURN(ExprPtr left, ParseMath1());
    ExprPtr result;
    const Expr* previous = nullptr;
    std::vector<ExprPtr> operands;
    while (true) {
      std::string op;
      if (Cur().kind == K::kOp &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
           Cur().text == ">" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().kind == K::kName && Peek().text == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      ASSIGN_OR_RETURN(ExprPtr right, ParseMath1());
      ExprPtr lhs = previous == nullptr ? std::move(left) : Clone(*previous);
      previous = right.get();
      ASSIGN_OR_RETURN(ExprPtr cmp, Binary(Expr::Kind::kBinary, op, std::move(lhs), std::move(right), line));
      if (result == nullptr) {
        result = std::move(cmp);
      } else {
        ASSIGN_OR_RETURN(result, Binary(Expr::Kind::kAnd, "and", std::move(result), std::move(cmp), line));
      }
    }
    return result == nullptr ? std::move(left) : std::move(result);
  }

  static ExprPtr Clone(const Expr& e) {
    auto c = std::make_unique<Expr>();
    c->kind = e.kind;
    c->line = e.line;
    c->value = e.value;
    c->name = e.name;
    c->negated = e.negated;
    for (const auto& item : e.items) c->items.push_back(item ? Clone(*item) : nullptr);
    for (const auto& [k, v] : e.kwargs) c->kwargs.emplace_back(k, Clone(*v));
    return c;
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      std::string op = Cur().text;
      int line = Cur().line;
      Next();
      ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      ASSIGN_OR_RETURN(left, Binary(Expr::Kind::kBinary, op, std::move(left), std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
    ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
    while (IsOp("~")) {
      int line = Cur().line;
      Next();
      ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
      ASSIGN_OR_RETURN(left, Binary(Expr::Kind::kBinary, "~", std::move(left), std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
    ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Cur().text;
      int line = Cur().line;
      Next();
      ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      ASSIGN_OR_RETURN(left, Binary(Expr::Kind::kBinary, op, std::move(left), std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
    ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (IsOp("**")) {
      int line = Cur().line;
      Next();
      ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      ASSIGN_OR_RETURN(left, Binary(Expr::Kind::kBinary, "**", std::move(left), std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      node = MakeExpr(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur().line);
      Next();
      ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node->items.push_back(std::move(operand));
    } else {
      ASSIGN_OR_RETURN(node, ParsePrimary());
      ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    }
    if (with_filter) {
      ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& tok = Cur();
    int line = tok.line;
    if (tok.kind == K::kName) {
      std::string n = tok.text;
      Next();
      if (n == "true" || n == "True") return Literal(Value::Bool(true), line);
      if (n == "false" || n == "False") return Literal(Value::Bool(false), line);
      if (n == "none" || n == "None") return Literal(Value::None(), line);
      auto e = MakeExpr(Expr::Kind::kName, line);
      e->name = n;
      return e;
    }
    if (tok.kind == K::kString) {
      std::string s;
      while (Cur().kind == K::kString) {
        s += Cur().text;
        Next();
      }
      return Literal(Value::String(std::move(s)), line);
    }
    if (tok.kind == K::kInt) {
      Next();
      return Literal(Value::Int(tok.int_value), line);
    }
    if (tok.kind == K::kFloat) {
      Next();
      return Literal(Value::Float(tok.float_value), line);
    }
    if (IsOp("(")) {
      Next();
      if (IsOp(")")) {
        Next();
        return MakeExpr(Expr::Kind::kTuple, line);
      }
      ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
      if (IsOp(",")) {
        auto tuple = MakeExpr(Expr::Kind::kTuple, line);
        tuple->items.push_back(std::move(e));
        while (IsOp(",")) {
          Next();
          if (IsOp(")")) break;
          ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
          tuple->items.push_back(std::move(item));
        }
        e = std::move(tuple);
      }
      RETURN_IF_ERROR(ExpectOp(")"));
      return e;
    }
    if (IsOp("[")) {
      Next();
      auto list = MakeExpr(Expr::Kind::kList, line);
      while (!IsOp("]")) {
        if (!list->items.empty()) RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp("]")) break;
        ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
        list->items.push_back(std::move(item));
      }
      Next();
      return list;
    }
    if (IsOp("{")) {
      Next();
      auto dict = MakeExpr(Expr::Kind::kDict, line);
      while (!IsOp("}")) {
        if (!dict->items.empty()) RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp("}")) break;
        ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
        RETURN_IF_ERROR(ExpectOp(":"));
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        dict->items.push_back(std::move(key));
        dict->items.push_back(std::move(value));
      }
      Next();
      return dict;
    }
    return Error(absl::StrCat("unexpected ", Describe()));
  }

  static ExprPtr Literal(Value v, int line) {
    auto e = MakeExpr(Expr::Kind::kLiteral, line);
    e->value = std::move(v);
    return e;
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      int line = Cur().line;
      if (IsOp(".")) {
        Next();
        if (Cur().kind == K::kInt) {
          auto e = MakeExpr(Expr::Kind::kGetitem, line);
          e->items.push_back(std::move(node));
          e->items.push_back(Literal(Value::Int(Cur().int_value), line));
          Next();
          node = std::move(e);
          continue;
        }
        auto e = MakeExpr(Expr::Kind::kGetattr, line);
        ASSIGN_OR_RETURN(e->name, ExpectName());
        e->items.push_back(std::move(node));
        node = std::move(e);
      } else if (IsOp("[")) {
        Next();
        ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node), line));
      } else if (IsOp("(")) {
        ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node, int line) {
    std::vector<ExprPtr> parts;
    bool slice = false;
    auto part = [&]() -> absl::Status {
      if (IsOp(":") || IsOp("]")) {
        parts.push_back(nullptr);
        return absl::OkStatus();
      }
      ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
      parts.push_back(std::move(e));
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(part());
    while (IsOp(":") && parts.size() < 3) {
      slice = true;
      Next();
      RETURN_IF_ERROR(part());
    }
    RETURN_IF_ERROR(ExpectOp("]"));
    if (!slice) {
      if (parts[0] == nullptr) return Error("expected an index");
      auto e = MakeExpr(Expr::Kind::kGetitem, line);
      e->items.push_back(std::move(node));
      e->items.push_back(std::move(parts[0]));
      return e;
    }
    auto e = MakeExpr(Expr::Kind::kSlice, line);
    e->items.push_back(std::move(node));
    while (parts.size() < 3) parts.push_back(nullptr);
    for (auto& p : parts) e->items.push_back(std::move(p));
    return e;
  }

  // Arguments in parentheses into e (items from index 1, kwargs).
  absl::Status ParseArgs(Expr& e) {
    RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) RETURN_IF_ERROR(ExpectOp(","));
      first = false;
      if (IsOp(")")) break;
      if (Cur().kind == K::kName && Peek().kind == K::kOp && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        e.kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        if (!e.kwargs.empty()) return Error("positional argument follows keyword argument");
        ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        e.items.push_back(std::move(v));
      }
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    auto e = MakeExpr(Expr::Kind::kCall, Cur().line);
    e->items.push_back(std::move(callee));
    RETURN_IF_ERROR(ParseArgs(*e));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr operand) {
    if (IsOp("|")) Next();
    auto e = MakeExpr(Expr::Kind::kFilter, Cur().line);
    ASSIGN_OR_RETURN(e->name, ExpectName());
    while (IsOp(".")) {
      Next();
      ASSIGN_OR_RETURN(std::string part, ExpectName());
      e->name += "." + part;
    }
    e->items.push_back(std::move(operand));
    if (IsOp("(")) RETURN_IF_ERROR(ParseArgs(*e));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
      } else if (IsName("is")) {
        ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (IsOp("(")) {
        ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr operand) {
    auto e = MakeExpr(Expr::Kind::kTest, Cur().line);
    Next();  // is
    if (IsName("not")) {
      e->negated = true;
      Next();
    }
    ASSIGN_OR_RETURN(e->name, ExpectName());
    while (IsOp(".")) {
      Next();
      ASSIGN_OR_RETURN(std::string part, ExpectName());
      e->name += "." + part;
    }
    e->items.push_back(std::move(operand));
    if (IsOp("(")) {
      RETURN_IF_ERROR(ParseArgs(*e));
    } else if ((Cur().kind == K::kName || Cur().kind == K::kString || Cur().kind == K::kInt ||
                Cur().kind == K::kFloat || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return Error("you cannot chain multiple tests with 'is'");
      ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      e->items.push_back(std::move(arg));
    }
    return e;
  }

  const std::vector<Token>& t_;
  std::string name_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens, std::string_view name) {
  return Parser(tokens, name).Template();
}

}  // namespace flotilla::inference::jinja
