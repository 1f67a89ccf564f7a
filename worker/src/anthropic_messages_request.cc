// Anthropic Messages: the request body of POST /v1/messages and /v1/messages/count_tokens.
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "wire_json.h"
#include "wire_requests.h"

namespace flotilla::worker::wire {
namespace {

const std::vector<std::string> kTextBlocks = {"text"};

// A user turn's blocks become tool turns (one per tool_result) and user turns (the text).
absl::Status ParseUserBlocks(const InJson& content, const std::string& path, ChatRequest* req) {
  if (content.is_string()) {
    ChatMessage m;
    m.role = ChatMessage::Role::kUser;
    m.content = content.get<std::string>();
    req->messages.push_back(std::move(m));
    return absl::OkStatus();
  }
  if (!content.is_array()) return Invalid(path, "expected a string or an array of content blocks");
  std::string text;
  bool have_text = false;
  auto flush = [&] {
    if (!have_text) return;
    ChatMessage m;
    m.role = ChatMessage::Role::kUser;
    m.content = std::move(text);
    req->messages.push_back(std::move(m));
    text.clear();
    have_text = false;
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const InJson& b = content[i];
    std::string bpath = absl::StrCat(path, "[", i, "]");
    if (!b.is_object()) return Invalid(bpath, "expected a content block object");
    std::string type;
    RETURN_IF_ERROR(ReadString(b, "type", bpath + ".type", &type));
    if (type == "text") {
      std::string t;
      RETURN_IF_ERROR(ReadString(b, "text", bpath + ".text", &t));
      if (have_text) text += "\n";
      text += t;
      have_text = true;
    } else if (type == "tool_result") {
      flush();
      ChatMessage m;
      m.role = ChatMessage::Role::kTool;
      RETURN_IF_ERROR(ReadString(b, "tool_use_id", bpath + ".tool_use_id", &m.tool_call_id));
      if (m.tool_call_id.empty()) return Invalid(bpath + ".tool_use_id", "required");
      auto c = b.find("content");
      ASSIGN_OR_RETURN(m.content, ReadTextContent(c == b.end() ? InJson() : *c, bpath + ".content", kTextBlocks));
      bool is_error = false;
      RETURN_IF_ERROR(ReadBool(b, "is_error", bpath + ".is_error", &is_error));
      if (is_error) m.content = "[error] " + m.content;
      req->messages.push_back(std::move(m));
    } else if (type == "image" || type == "document") {
      if (have_text) text += "\n";
      text += "[" + type + " omitted: this model reads text only]";
      have_text = true;
    } else {
      return Invalid(bpath + ".type", absl::StrCat("unsupported content block type '", type,
                                                   "' in a user message (supported: text, tool_result, image, document)"));
    }
  }
  flush();
  return absl::OkStatus();
}

absl::Status ParseAssistantBlocks(const InJson& content, const std::string& path, ChatRequest* req) {
  ChatMessage m;
  m.role = ChatMessage::Role::kAssistant;
  if (content.is_string()) {
    m.content = content.get<std::string>();
  } else if (content.is_array()) {
    std::vector<std::string> texts;
    for (size_t i = 0; i < content.size(); ++i) {
      const InJson& b = content[i];
      std::string bpath = absl::StrCat(path, "[", i, "]");
      if (!b.is_object()) return Invalid(bpath, "expected a content block object");
      std::string type;
      RETURN_IF_ERROR(ReadString(b, "type", bpath + ".type", &type));
      if (type == "text") {
        std::string t;
        RETURN_IF_ERROR(ReadString(b, "text", bpath + ".text", &t));
        texts.push_back(std::move(t));
      } else if (type == "tool_use") {
        ToolCall call;
        RETURN_IF_ERROR(ReadString(b, "id", bpath + ".id", &call.id));
        RETURN_IF_ERROR(ReadString(b, "name", bpath + ".name", &call.name));
        if (call.name.empty()) return Invalid(bpath + ".name", "required");
        auto input = b.find("input");
        if (input != b.end() && !input->is_null() && !input->is_object()) {
          return Invalid(bpath + ".input", "expected an object");
        }
        call.arguments_json = (input == b.end() || input->is_null()) ? "{}" : input->dump();
        m.tool_calls.push_back(std::move(call));
      } else if (type == "thinking" || type == "redacted_thinking") {
        continue;  // this model does not think in hidden blocks
      } else {
        return Invalid(bpath + ".type", absl::StrCat("unsupported content block type '", type,
                                                     "' in an assistant message (supported: text, tool_use)"));
      }
    }
    for (size_t i = 0; i < texts.size(); ++i) m.content += (i ? "\n" : "") + texts[i];
  } else {
    return Invalid(path, "expected a string or an array of content blocks");
  }
  req->messages.push_back(std::move(m));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatRequest> ParseMessagesRequest(const std::string& text, bool require_max_tokens) {
  ASSIGN_OR_RETURN(InJson body, ParseBody(text));
  ChatRequest req;
  RETURN_IF_ERROR(ReadString(body, "model", "model", &req.model));
  auto sys = body.find("system");
  if (sys != body.end()) {
    ASSIGN_OR_RETURN(req.system, ReadTextContent(*sys, "system", kTextBlocks));
  }
  auto msgs = body.find("messages");
  if (msgs == body.end()) return Invalid("messages", "field required");
  if (!msgs->is_array()) return Invalid("messages", "expected an array");
  if (msgs->empty()) return Invalid("messages", "must contain at least one message");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const InJson& m = (*msgs)[i];
    std::string path = absl::StrCat("messages.", i);
    if (!m.is_object()) return Invalid(path, "expected an object");
    std::string role;
    RETURN_IF_ERROR(ReadString(m, "role", path + ".role", &role));
    auto c = m.find("content");
    if (c == m.end()) return Invalid(path + ".content", "field required");
    if (role == "user") {
      RETURN_IF_ERROR(ParseUserBlocks(*c, path + ".content", &req));
    } else if (role == "assistant") {
      RETURN_IF_ERROR(ParseAssistantBlocks(*c, path + ".content", &req));
    } else if (role == "system") {
      // Some clients (Claude Code) interleave system turns; they stay where they were sent.
      ChatMessage sys_msg;
      sys_msg.role = ChatMessage::Role::kSystem;
      ASSIGN_OR_RETURN(sys_msg.content, ReadTextContent(*c, path + ".content", kTextBlocks));
      req.messages.push_back(std::move(sys_msg));
    } else {
      return Invalid(path + ".role", absl::StrCat("unknown role '", role, "' (expected user, assistant or system)"));
    }
  }
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return Invalid("tools", "expected an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const InJson& t = (*tools)[i];
      std::string path = absl::StrCat("tools.", i);
      if (!t.is_object()) return Invalid(path, "expected an object");
      auto schema = t.find("input_schema");
      if (schema == t.end()) continue;  // server tools (web search...) do not exist here
      ToolSpec spec;
      RETURN_IF_ERROR(ReadString(t, "name", path + ".name", &spec.name));
      if (spec.name.empty()) return Invalid(path + ".name", "field required");
      RETURN_IF_ERROR(ReadString(t, "description", path + ".description", &spec.description));
      spec.parameters_json = schema->dump();
      req.tools.push_back(std::move(spec));
    }
  }
  if (require_max_tokens && body.find("max_tokens") == body.end()) {
    return Invalid("max_tokens", "field required");
  }
  RETURN_IF_ERROR(ReadUint(body, "max_tokens", "max_tokens", 1, 1u << 30, &req.max_tokens));
  RETURN_IF_ERROR(ReadFloat(body, "temperature", "temperature", 0, 1, &req.temperature));
  RETURN_IF_ERROR(ReadFloat(body, "top_p", "top_p", 0, 1, &req.top_p));
  RETURN_IF_ERROR(ReadBool(body, "stream", "stream", &req.stream));
  return req;
}

}  // namespace flotilla::worker::wire
