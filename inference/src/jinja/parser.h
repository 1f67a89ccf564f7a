// Builds the statement tree from the lexer's tokens, with jinja2's grammar and operator
// precedence (or < and < not < comparisons and `in` < + - < ~ < * / // % < ** < unary, with
// filters, tests, calls, attributes and subscripts binding tightest).
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace flotilla::inference::jinja {

// Errors are InvalidArgument "<name>:<line>: ...".
absl::StatusOr<Body> Parse(const std::vector<Token>& tokens, std::string_view name);

}  // namespace flotilla::inference::jinja
