// The Anthropic Messages wire format of RemoteChat (remote_chat.h): the request body it sends
// and the reply it reads.
#include "absl/strings/str_cat.h"
#include "flotilla/worker/remote_chat.h"

namespace flotilla::worker {

using nlohmann::json;

json RemoteMessagesRequestBody(const std::string& model, const std::vector<ChatMessage>& messages,
                               const std::vector<ToolSpec>& tools, const ChatRequest& params) {
  std::string system;
  json turns = json::array();
  // Appends blocks to the last turn when it has `role`, else opens a turn.
  auto add = [&turns](const char* role, json blocks) {
    if (!turns.empty() && turns.back()["role"] == role) {
      for (json& b : blocks) turns.back()["content"].push_back(std::move(b));
    } else {
      turns.push_back({{"role", role}, {"content", std::move(blocks)}});
    }
  };
  for (const ChatMessage& m : messages) {
    switch (m.role) {
      case ChatMessage::Role::kSystem:
        absl::StrAppend(&system, system.empty() ? "" : "\n\n", m.content);
        break;
      case ChatMessage::Role::kUser:
        add("user", json::array({{{"type", "text"}, {"text", m.content}}}));
        break;
      case ChatMessage::Role::kTool:
        add("user", json::array({{{"type", "tool_result"}, {"tool_use_id", m.tool_call_id}, {"content", m.content}}}));
        break;
      case ChatMessage::Role::kAssistant: {
        json blocks = json::array();
        if (!m.content.empty()) blocks.push_back({{"type", "text"}, {"text", m.content}});
        for (const ToolCall& c : m.tool_calls) {
          json input = json::parse(c.arguments_json, nullptr, false);
          if (input.is_discarded() || !input.is_object()) input = json::object();
          blocks.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", std::move(input)}});
        }
        // The API rejects an empty assistant turn; an empty reply is an empty text.
        if (blocks.empty()) blocks.push_back({{"type", "text"}, {"text", ""}});
        add("assistant", std::move(blocks));
        break;
      }
    }
  }
  json body = {{"model", model},          {"messages", turns},         {"max_tokens", params.max_tokens},
               {"temperature", params.temperature}, {"top_p", params.top_p}, {"stream", false}};
  if (!system.empty()) body["system"] = system;
  if (!tools.empty()) {
    json ts = json::array();
    for (const ToolSpec& t : tools) {
      json schema = json::parse(t.parameters_json, nullptr, false);
      if (schema.is_discarded() || !schema.is_object()) schema = json{{"type", "object"}};
      ts.push_back({{"name", t.name}, {"description", t.description}, {"input_schema", schema}});
    }
    body["tools"] = ts;
  }
  return body;
}

absl::StatusOr<RemoteReply> ParseRemoteMessagesReply(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("reply: not a JSON object");
  if (!j.contains("content") || !j["content"].is_array()) return absl::InvalidArgumentError("reply: content: missing");
  RemoteReply r;
  for (size_t i = 0; i < j["content"].size(); ++i) {
    const json& b = j["content"][i];
    const std::string at = absl::StrCat("reply: content[", i, "]");
    if (!b.is_object() || !b.value("type", json()).is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".type: missing"));
    }
    const std::string type = b["type"].get<std::string>();
    if (type == "text") {
      if (!b.value("text", json()).is_string()) return absl::InvalidArgumentError(absl::StrCat(at, ".text: missing"));
      r.text += b["text"].get<std::string>();
    } else if (type == "tool_use") {
      if (!b.value("name", json()).is_string()) return absl::InvalidArgumentError(absl::StrCat(at, ".name: missing"));
      ToolCall call;
      call.id = b.value("id", json("")).is_string() ? b.value("id", "") : "";
      call.name = b["name"].get<std::string>();
      call.arguments_json = b.value("input", json::object()).dump();
      r.tool_calls.push_back(std::move(call));
    }
    // Other blocks (thinking, ...) carry nothing the trajectory's text keeps.
  }
  const std::string stop = j.value("stop_reason", json("")).is_string() ? j.value("stop_reason", "") : "";
  r.finish_reason = stop == "max_tokens" ? "length" : stop == "tool_use" ? "tool_calls" : stop.empty() ? "" : "stop";
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    if (u.value("input_tokens", json()).is_number_integer()) r.prompt_tokens = u["input_tokens"].get<int64_t>();
    if (u.value("output_tokens", json()).is_number_integer()) r.completion_tokens = u["output_tokens"].get<int64_t>();
  }
  return r;
}

}  // namespace flotilla::worker
