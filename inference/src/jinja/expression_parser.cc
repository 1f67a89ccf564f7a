#include "jinja/expression_parser.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "jinja/limits.h"

namespace flotilla::inference::jinja {
namespace {

ExprPtr MakeExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

}  // namespace

// `| f(args) | g ...` after `chain`; the innermost operand is null (a block's output).
absl::Status ExpressionParser::NestingGuard::status() const {
  if (p_.nesting_ <= kMaxParseNesting) return absl::OkStatus();
  return p_.Error(absl::StrCat("nested deeper than ", kMaxParseNesting, " levels"));
}

absl::Status ExpressionParser::CheckDepth(const Expr& e) const {
  std::vector<std::pair<const Expr*, int>> stack = {{&e, 1}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (depth > kMaxExpressionDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ":", node->line, ": expression nested deeper than ", kMaxExpressionDepth, " levels"));
    }
    for (const auto& child : node->items) {
      if (child != nullptr) stack.push_back({child.get(), depth + 1});
    }
    for (const auto& kw : node->kwargs) {
      if (kw.second != nullptr) stack.push_back({kw.second.get(), depth + 1});
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilterChain(ExprPtr chain) {
  while (IsOp("|")) {
    ASSIGN_OR_RETURN(chain, ParseFilter(std::move(chain)));
  }
  if (chain != nullptr) RETURN_IF_ERROR(CheckDepth(*chain));
  return chain;
}

// Expressions.
absl::StatusOr<ExprPtr> ExpressionParser::ParseTuple(bool with_condexpr) {
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

absl::StatusOr<ExprPtr> ExpressionParser::ParseExpression(bool with_condexpr) {
  NestingGuard guard(*this);
  RETURN_IF_ERROR(guard.status());
  ++expression_level_;
  absl::StatusOr<ExprPtr> e = ParseExpressionBody(with_condexpr);
  --expression_level_;
  if (e.ok() && expression_level_ == 0) RETURN_IF_ERROR(CheckDepth(**e));
  return e;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseExpressionBody(bool with_condexpr) {
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

absl::StatusOr<ExprPtr> ExpressionParser::Binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right, int line) {
  auto e = MakeExpr(kind, line);
  e->name = std::move(op);
  e->items.push_back(std::move(left));
  e->items.push_back(std::move(right));
  return e;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseOr() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (IsName("or")) {
    int line = Cur().line;
    Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    ASSIGN_OR_RETURN(left, Binary(Expr::Kind::kOr, "or", std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseAnd() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (IsName("and")) {
    int line = Cur().line;
    Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    ASSIGN_OR_RETURN(left, Binary(Expr::Kind::kAnd, "and", std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseNot() {
  NestingGuard guard(*this);
  RETURN_IF_ERROR(guard.status());
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
absl::StatusOr<ExprPtr> ExpressionParser::ParseCompare() {
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

ExprPtr ExpressionParser::Clone(const Expr& e) {
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

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath1() {
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

absl::StatusOr<ExprPtr> ExpressionParser::ParseConcat() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
  while (IsOp("~")) {
    int line = Cur().line;
    Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
    ASSIGN_OR_RETURN(left, Binary(Expr::Kind::kBinary, "~", std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath2() {
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

absl::StatusOr<ExprPtr> ExpressionParser::ParsePow() {
  ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
  while (IsOp("**")) {
    int line = Cur().line;
    Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
    ASSIGN_OR_RETURN(left, Binary(Expr::Kind::kBinary, "**", std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  NestingGuard guard(*this);
  RETURN_IF_ERROR(guard.status());
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

absl::StatusOr<ExprPtr> ExpressionParser::ParsePrimary() {
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

ExprPtr ExpressionParser::Literal(Value v, int line) {
  auto e = MakeExpr(Expr::Kind::kLiteral, line);
  e->value = std::move(v);
  return e;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePostfix(ExprPtr node) {
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

absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscript(ExprPtr node, int line) {
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
absl::Status ExpressionParser::ParseArgs(Expr& e) {
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

absl::StatusOr<ExprPtr> ExpressionParser::ParseCall(ExprPtr callee) {
  auto e = MakeExpr(Expr::Kind::kCall, Cur().line);
  e->items.push_back(std::move(callee));
  RETURN_IF_ERROR(ParseArgs(*e));
  return e;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilter(ExprPtr operand) {
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

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilterExpr(ExprPtr node) {
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

absl::StatusOr<ExprPtr> ExpressionParser::ParseTest(ExprPtr operand) {
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

}  // namespace flotilla::inference::jinja
