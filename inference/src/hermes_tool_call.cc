// Hermes / Qwen tool calls: a JSON object between <tool_call> and </tool_call>.
#include "tool_call_formats.h"

namespace flotilla::inference {

std::optional<ToolCall> ParseHermesCall(std::string_view body) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(Trim(body), nullptr,
                                                           /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  ToolCall call;
  call.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end()) {
    call.arguments_json = "{}";
    return call;
  }
  if (args->is_string()) {
    // Some models write the arguments as a JSON string; it must hold an object.
    nlohmann::ordered_json inner = nlohmann::ordered_json::parse(args->get<std::string>(), nullptr, false);
    if (inner.is_discarded() || !inner.is_object()) return std::nullopt;
    call.arguments_json = inner.dump();
    return call;
  }
  if (!args->is_object()) return std::nullopt;
  call.arguments_json = args->dump();
  return call;
}

}  // namespace flotilla::inference
