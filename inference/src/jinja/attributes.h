// Attribute and item access as jinja2's sandbox does it: `obj.name` prefers the object's
// methods (str.strip, dict.items, ...) and falls back to the item; `obj[key]` prefers the item
// and falls back to the method. A missing item or attribute is an undefined value whose hint
// names it; only the immutable sandbox's safe methods exist (no list.append, no dict.update).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "jinja/value.h"

namespace flotilla::inference::jinja {

// obj must not be undefined (the caller reports that).
Value GetAttribute(const Value& obj, const std::string& name);
absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
// Python's str.format with {} / {0} / {name} fields (no format specs).
absl::StatusOr<std::string> StrFormat(const std::string& fmt, const CallArgs& args);

}  // namespace flotilla::inference::jinja
