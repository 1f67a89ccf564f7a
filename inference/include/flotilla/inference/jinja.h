// A Jinja template interpreter for Hugging Face chat templates: what jinja2 renders under
// transformers' environment (ImmutableSandboxedEnvironment with trim_blocks=True,
// lstrip_blocks=True and the loopcontrols extension; tojson with ensure_ascii=False and
// sort_keys=False; the raise_exception and strftime_now globals), byte for byte.
//
// Supported: {{ }}, {% if/elif/else %}, {% for %} (loop.*, else, `if` filter, unpacking,
// break/continue), {% set %} (also block set, namespace attributes), {% macro %},
// {% call %}, {% filter %}, {% raw %}, {% generation %}, comments, whitespace control;
// Python-like values with str/dict/list methods, slicing, the usual filters and tests.
// Not supported (a parse error): include/import/extends/block, recursive loops.
//
// A Template is immutable after Parse and safe to render from many threads at once.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference::jinja {

struct RenderOptions {
  // What strftime_now() formats; the current time when unset.
  std::optional<std::chrono::system_clock::time_point> now;
};

class Template {
 public:
  // Parses `source`; errors are InvalidArgument "<name>:<line>: <what>".
  static absl::StatusOr<Template> Parse(std::string_view source, std::string name);

  // Renders with the members of the JSON object `context` as variables (member order is kept:
  // tojson and dict iteration show keys in the order given). Errors, a template's
  // raise_exception(msg) included, are InvalidArgument "<name>:<line>: <what>".
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

  const std::string& name() const { return name_; }

 private:
  struct Parsed;
  Template(std::shared_ptr<const Parsed> parsed, std::string name) : parsed_(std::move(parsed)), name_(std::move(name)) {}

  std::shared_ptr<const Parsed> parsed_;
  std::string name_;
};

}  // namespace flotilla::inference::jinja
