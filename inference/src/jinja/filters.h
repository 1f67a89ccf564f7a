// jinja2's built-in filters and tests, with transformers' tojson (ensure_ascii=False,
// sort_keys=False, json.dumps's separators) in place of jinja2's HTML-safe one.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "jinja/value.h"

namespace flotilla::inference::jinja {

// Errors (an unknown filter or test, a bad operand) are InvalidArgument without a location.
absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& operand, const CallArgs& args);
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& operand, const CallArgs& args);

}  // namespace flotilla::inference::jinja
