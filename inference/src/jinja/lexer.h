// Splits a template into tokens as jinja2's lexer does under transformers' environment
// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False): template text with the
// whitespace control of `{%-`, `-%}`, `{%+`, `+%}` already applied, tag delimiters, and the
// expression tokens inside tags. Comments are dropped; {% raw %} bodies become text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::inference::jinja {

struct Token {
  enum class Kind { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Kind kind = Kind::kEof;
  std::string text;  // text, name, string value (unescaped) or operator
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

// Errors are InvalidArgument "<name>:<line>: ...".
absl::StatusOr<std::vector<Token>> Lex(std::string_view source, std::string_view name);

}  // namespace flotilla::inference::jinja
