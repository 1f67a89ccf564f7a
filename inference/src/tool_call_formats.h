// The bodies of one family's tool-call blocks, parsed into calls (ids left to the caller).
// Each returns nullopt for a body that is not a well-formed call.
#pragma once

#include <optional>
#include <string_view>

#include "flotilla/inference/chat_template.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference {

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";
inline constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";

// std::string_view helpers (this Abseil's string_view is its own type).
inline bool IsAsciiSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
inline std::string_view TrimLeading(std::string_view s) {
  while (!s.empty() && IsAsciiSpace(s.front())) s.remove_prefix(1);
  return s;
}
inline std::string_view Trim(std::string_view s) {
  s = TrimLeading(s);
  while (!s.empty() && IsAsciiSpace(s.back())) s.remove_suffix(1);
  return s;
}
inline bool ConsumePrefix(std::string_view* s, std::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}
inline bool ConsumeSuffix(std::string_view* s, std::string_view suffix) {
  if (s->size() < suffix.size() || s->substr(s->size() - suffix.size()) != suffix) return false;
  s->remove_suffix(suffix.size());
  return true;
}

// Hermes: {"name": string, "arguments": object (or a string holding one)}.
std::optional<ToolCall> ParseHermesCall(std::string_view body);
// Qwen3-Coder: <function=NAME><parameter=P>value</parameter>...</function>; values typed by
// the tools' parameter schemas when given.
std::optional<ToolCall> ParseQwen3CoderCall(std::string_view body, const nlohmann::ordered_json& tools);
// DeepSeek-V3, between <｜tool▁call▁begin｜> and <｜tool▁call▁end｜>:
// TYPE<｜tool▁sep｜>NAME\n```json\n{...}\n```
std::optional<ToolCall> ParseDeepSeekCall(std::string_view body);

}  // namespace flotilla::inference
