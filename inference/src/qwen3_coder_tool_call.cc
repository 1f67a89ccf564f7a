// Qwen3-Coder tool calls: <function=NAME> with <parameter=P>value</parameter> children, the
// values typed by the tool's parameter schema.
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "tool_call_formats.h"

namespace flotilla::inference {
namespace {

// The JSON schema type of `function`'s parameter `param` in the request's tools; "" if unknown.
std::string SchemaType(const nlohmann::ordered_json& tools, const std::string& function, const std::string& param) {
  if (!tools.is_array()) return "";
  for (const auto& tool : tools) {
    const auto& fn = tool.contains("function") ? tool["function"] : tool;
    if (!fn.is_object() || fn.value("name", "") != function) continue;
    if (!fn.contains("parameters") || !fn["parameters"].is_object()) return "";
    const auto& props = fn["parameters"].value("properties", nlohmann::ordered_json::object());
    if (!props.is_object() || !props.contains(param) || !props[param].is_object()) return "";
    const auto& type = props[param].value("type", nlohmann::ordered_json());
    return type.is_string() ? type.get<std::string>() : "";
  }
  return "";
}

nlohmann::ordered_json TypedValue(const std::string& text, const std::string& type) {
  if (type.empty() || type == "string" || type == "str" || type == "text") return text;
  if (text == "null") return nullptr;
  std::string t = std::string(Trim(text));
  if (type == "integer" || type == "int") {
    char* end = nullptr;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (!t.empty() && *end == '\0') return v;
    return text;
  }
  if (type == "number" || type == "float") {
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (!t.empty() && *end == '\0') {
      if (t.find_first_of(".eE") == std::string::npos) return static_cast<long long>(v);
      return v;
    }
    return text;
  }
  if (type == "boolean" || type == "bool") {
    std::string lower = absl::AsciiStrToLower(t);
    if (lower == "true" || lower == "false") return lower == "true";
    return text;
  }
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(t, nullptr, false);
  return j.is_discarded() ? nlohmann::ordered_json(text) : j;
}

}  // namespace

std::optional<ToolCall> ParseQwen3CoderCall(std::string_view body, const nlohmann::ordered_json& tools) {
  std::string_view s = Trim(body);
  constexpr std::string_view kFunction = "<function=", kFunctionEnd = "</function>";
  constexpr std::string_view kParam = "<parameter=", kParamEnd = "</parameter>";
  if (!ConsumePrefix(&s, kFunction)) return std::nullopt;
  size_t gt = s.find('>');
  if (gt == std::string_view::npos) return std::nullopt;
  ToolCall call;
  call.name = std::string(Trim(s.substr(0, gt)));
  if (call.name.empty()) return std::nullopt;
  s.remove_prefix(gt + 1);
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  while (true) {
    s = TrimLeading(s);
    if (ConsumePrefix(&s, kFunctionEnd)) break;
    if (!ConsumePrefix(&s, kParam)) return std::nullopt;
    gt = s.find('>');
    if (gt == std::string_view::npos) return std::nullopt;
    std::string param(Trim(s.substr(0, gt)));
    s.remove_prefix(gt + 1);
    size_t end = s.find(kParamEnd);
    if (end == std::string_view::npos || param.empty()) return std::nullopt;
    std::string value(s.substr(0, end));
    s.remove_prefix(end + kParamEnd.size());
    // The template writes "<parameter=p>\nvalue\n</parameter>": one newline each side is layout.
    if (!value.empty() && value.front() == '\n') value.erase(0, 1);
    if (!value.empty() && value.back() == '\n') value.pop_back();
    args[param] = TypedValue(value, SchemaType(tools, call.name, param));
  }
  if (!Trim(s).empty()) return std::nullopt;
  call.arguments_json = args.dump();
  return call;
}

}  // namespace flotilla::inference
