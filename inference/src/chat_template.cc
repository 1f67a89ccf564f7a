#include "flotilla/inference/chat_template.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference {
namespace {

int32_t RoleToken(ChatMessage::Role r) {
  switch (r) {
    case ChatMessage::Role::kSystem: return kSystem;
    case ChatMessage::Role::kUser: return kUser;
    case ChatMessage::Role::kAssistant: return kAssistant;
    case ChatMessage::Role::kTool: return kTool;
  }
  return kUser;
}

void Append(std::vector<int32_t>& out, const std::vector<int32_t>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

// The body of a tool-call block; the Python side (tokenizer.tool_call_json) writes the same bytes.
std::string ToolCallBody(const ToolCall& call) {
  std::string args = call.arguments_json.empty() ? "{}" : call.arguments_json;
  return absl::StrCat("{\"name\": ", nlohmann::json(call.name).dump(), ", \"arguments\": ", args, "}");
}

// Parses one block's body; nullopt when it is not {"name": string, "arguments": object}.
std::optional<ToolCall> ParseToolCall(const std::string& body, size_t index) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty()) {
    return std::nullopt;
  }
  ToolCall call;
  call.id = absl::StrCat("call_", index);
  call.name = j["name"].get<std::string>();
  if (j.contains("arguments")) {
    if (!j["arguments"].is_object()) return std::nullopt;
    call.arguments_json = j["arguments"].dump();
  } else {
    call.arguments_json = "{}";
  }
  return call;
}

}  // namespace

std::vector<int32_t> RenderMessage(const ChatMessage& m) {
  std::vector<int32_t> ids{RoleToken(m.role)};
  Append(ids, Encode(m.content));
  if (m.role == ChatMessage::Role::kAssistant) {
    for (const ToolCall& call : m.tool_calls) {
      ids.push_back(kToolCallBegin);
      Append(ids, Encode(ToolCallBody(call)));
      ids.push_back(kToolCallEnd);
    }
  }
  ids.push_back(kEndTurn);
  return ids;
}

std::vector<int32_t> RenderConversation(const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt) {
  std::vector<int32_t> ids{kBos};
  for (const ChatMessage& m : messages) Append(ids, RenderMessage(m));
  if (add_generation_prompt) ids.push_back(kAssistant);
  return ids;
}

ParsedReply ParseAssistantReply(const std::vector<int32_t>& generated) {
  ParsedReply reply;
  size_t i = 0;
  const size_t n = generated.size();
  while (i < n) {
    int32_t t = generated[i];
    if (t != kToolCallBegin) {
      if (t >= 0 && t < 256) {
        reply.text.push_back(static_cast<char>(t));
      } else if (t != kEndTurn && t != kEos) {
        reply.text += SpecialName(t);
      }
      ++i;
      continue;
    }
    // A block runs to the next <tool_call_end>; a nested begin or a missing end leaves the
    // block as text.
    size_t j = i + 1;
    while (j < n && generated[j] != kToolCallEnd && generated[j] != kToolCallBegin) ++j;
    std::vector<int32_t> body_ids(generated.begin() + i + 1, generated.begin() + j);
    bool closed = j < n && generated[j] == kToolCallEnd;
    bool bytes_only = true;
    for (int32_t b : body_ids) bytes_only = bytes_only && b >= 0 && b < 256;
    std::optional<ToolCall> call;
    if (closed && bytes_only) call = ParseToolCall(Decode(body_ids), reply.tool_calls.size());
    if (call.has_value()) {
      reply.tool_calls.push_back(std::move(*call));
      i = j + 1;
    } else {
      reply.text += SpecialName(kToolCallBegin);
      reply.text += Decode(body_ids);
      if (closed) reply.text += SpecialName(kToolCallEnd);
      i = closed ? j + 1 : j;
    }
  }
  return reply;
}

}  // namespace flotilla::inference
