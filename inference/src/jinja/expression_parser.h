// jinja2's expression grammar, from loosest to tightest: conditional (a if b else c), or, and,
// not, comparisons and `in` (chained as Python chains them), + -, ~, * / // %, **, unary
// - +, then filters (|), tests (is), calls, attributes and subscripts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/token_cursor.h"

namespace flotilla::inference::jinja {

using ExprPtr = std::unique_ptr<Expr>;

class ExpressionParser : public TokenCursor {
 public:
  using TokenCursor::TokenCursor;

  // A comma-separated list is a tuple; with_condexpr=false leaves `if` to the caller (a for
  // loop's filter).
  absl::StatusOr<ExprPtr> ParseFilterChain(ExprPtr chain);
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr);
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr);
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr operand);

 protected:
  // Counts a level of recursive descent (blocks, parentheses, unary operators); the guard's
  // status is an error once kMaxParseNesting levels are open.
  class NestingGuard {
   public:
    explicit NestingGuard(ExpressionParser& p) : p_(p) { ++p_.nesting_; }
    ~NestingGuard() { --p_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;
    absl::Status status() const;

   private:
    ExpressionParser& p_;
  };

 private:
  // InvalidArgument when `e` is deeper than kMaxExpressionDepth (a long chain of operators,
  // attributes or filters): evaluating it would recurse that deep. Iterative.
  absl::Status CheckDepth(const Expr& e) const;

  int nesting_ = 0;
  int expression_level_ = 0;  // ParseExpression calls open: the outermost checks the depth
  absl::StatusOr<ExprPtr> ParseExpressionBody(bool with_condexpr);
  absl::StatusOr<ExprPtr> Binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right, int line);
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  static ExprPtr Clone(const Expr& e);
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParsePrimary();
  static ExprPtr Literal(Value v, int line);
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node, int line);
  absl::Status ParseArgs(Expr& e);
  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee);
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr operand);
};

}  // namespace flotilla::inference::jinja
