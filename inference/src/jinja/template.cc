// The public Template: parse once, render with a fresh scope of globals per call.
#include <ctime>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/jinja.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/renderer.h"

namespace flotilla::inference::jinja {

struct Template::Parsed {
  Body body;
};

namespace {

// jinja2's sandbox refuses ranges longer than this.
constexpr int64_t kMaxRange = 100000;

absl::StatusOr<Value> Range(const CallArgs& a) {
  std::vector<int64_t> n;
  for (const Value& v : a.positional) {
    if (!v.is_int() && !v.is_bool()) return absl::InvalidArgumentError("range() takes integers");
    n.push_back(v.int_value());
  }
  if (n.empty() || n.size() > 3) return absl::InvalidArgumentError("range expected 1 to 3 arguments");
  int64_t start = n.size() == 1 ? 0 : n[0], stop = n.size() == 1 ? n[0] : n[1], step = n.size() == 3 ? n[2] : 1;
  if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) {
      return absl::InvalidArgumentError("range too big, the sandbox blocks ranges larger than MAX_RANGE (100000)");
    }
    out.push_back(Value::Int(i));
    if (__builtin_add_overflow(i, step, &i)) break;  // the next value is past any int64 stop
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> MakeDict(const CallArgs& a, bool is_namespace) {
  ValueDict d;
  d.is_namespace = is_namespace;
  if (!a.positional.empty()) {
    if (!a.positional[0].is_dict()) return absl::InvalidArgumentError("namespace()/dict() takes a mapping or keywords");
    for (const auto& [k, v] : a.positional[0].dict().items) d.Set(k, v);
  }
  for (const auto& [k, v] : a.keyword) d.Set(k, v);
  return Value::Dict(std::move(d));
}

// Every namespace() a render made. A namespace is the one value a template can change, so the
// one way to a reference cycle (`set ns.x = [ns]`, or a macro that sees ns kept in it): the
// render empties them all when it ends, and what they held is freed.
using Namespaces = std::vector<Value>;

std::shared_ptr<Scope> Globals(const nlohmann::ordered_json& context, const RenderOptions& options,
                               const std::shared_ptr<Namespaces>& namespaces) {
  auto globals = std::make_shared<Scope>(nullptr);
  globals->vars["range"] = Value::Callable(Range, "range");
  globals->vars["dict"] = Value::Callable([](const CallArgs& a) { return MakeDict(a, false); }, "dict");
  globals->vars["namespace"] = Value::Callable(
      [namespaces](const CallArgs& a) -> absl::StatusOr<Value> {
        ASSIGN_OR_RETURN(Value ns, MakeDict(a, true));
        namespaces->push_back(ns);
        return ns;
      },
      "namespace");
  globals->vars["raise_exception"] = Value::Callable(
      [](const CallArgs& a) -> absl::StatusOr<Value> {
        return absl::InvalidArgumentError(
            absl::StrCat("raise_exception: ", a.positional.empty() ? std::string() : a.positional[0].ToString()));
      },
      "raise_exception");
  auto now = options.now.value_or(std::chrono::system_clock::now());
  globals->vars["strftime_now"] = Value::Callable(
      [now](const CallArgs& a) -> absl::StatusOr<Value> {
        std::optional<std::string> format = StringArg(a, 0, "format");
        if (!format) return absl::InvalidArgumentError("strftime_now() takes a format");
        std::time_t t = std::chrono::system_clock::to_time_t(now);
        std::tm tm{};
        localtime_r(&t, &tm);
        char buf[512];
        size_t n = std::strftime(buf, sizeof(buf), format->c_str(), &tm);
        return Value::String(std::string(buf, n));
      },
      "strftime_now");
  auto vars = std::make_shared<Scope>(globals);
  if (context.is_object()) {
    for (const auto& [k, v] : context.items()) vars->vars[k] = Value::FromJson(v);
  }
  return vars;
}

}  // namespace

absl::StatusOr<Template> Template::Parse(std::string_view source, std::string name) {
  ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source, name));
  auto parsed = std::make_shared<Parsed>();
  ASSIGN_OR_RETURN(parsed->body, jinja::Parse(tokens, name));
  return Template(std::move(parsed), std::move(name));
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!context.is_object()) return absl::InvalidArgumentError(absl::StrCat(name_, ": the context must be a JSON object"));
  Renderer renderer(name_);
  auto namespaces = std::make_shared<Namespaces>();
  absl::StatusOr<std::string> out = renderer.Render(parsed_->body, Globals(context, options, namespaces));
  for (const Value& ns : *namespaces) ns.mutable_dict().items.clear();
  return out;
}

}  // namespace flotilla::inference::jinja
