// Python's binary operators on template values (+ - * / // % ** and comparisons, `in`),
// jinja2's `~` concatenation, and printf-style `str % args` formatting.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "jinja/value.h"

namespace flotilla::inference::jinja {

// The error for using an undefined value: its hint ("'x' is undefined").
absl::Status UndefinedError(const Value& v);

// op is one of + - * / // % ** ~ == != < <= > >= in, "not in". Errors are InvalidArgument
// without a location (the caller adds it).
absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b);

// `fmt % args`: args a tuple (positional), a dict (%(name)s) or one value.
absl::StatusOr<std::string> PercentFormat(const std::string& fmt, const Value& args);

}  // namespace flotilla::inference::jinja
