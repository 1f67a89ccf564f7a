// DeepSeek-V3 tool calls: TYPE<｜tool▁sep｜>NAME, then the arguments in a ```json fence.
#include <string>

#include "tool_call_formats.h"

namespace flotilla::inference {

std::optional<ToolCall> ParseDeepSeekCall(std::string_view body) {
  size_t sep = body.find(kDeepSeekSep);
  if (sep == std::string_view::npos) return std::nullopt;
  std::string_view rest = body.substr(sep + kDeepSeekSep.size());
  size_t newline = rest.find('\n');
  if (newline == std::string_view::npos) return std::nullopt;
  ToolCall call;
  call.name = std::string(Trim(rest.substr(0, newline)));
  if (call.name.empty()) return std::nullopt;
  std::string_view fenced = Trim(rest.substr(newline + 1));
  if (!ConsumePrefix(&fenced, "```json") || !ConsumeSuffix(&fenced, "```")) return std::nullopt;
  nlohmann::ordered_json args = nlohmann::ordered_json::parse(Trim(fenced), nullptr, false);
  if (args.is_discarded() || !args.is_object()) return std::nullopt;
  call.arguments_json = args.dump();
  return call;
}

}  // namespace flotilla::inference
