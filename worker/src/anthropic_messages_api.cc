// Anthropic Messages: POST /v1/messages and /v1/messages/count_tokens.
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "wire_apis.h"
#include "wire_common.h"

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

absl::StatusOr<ChatRequest> ParseRequest(const std::string& text, bool require_max_tokens) {
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

const char* StopReason(StopKind s) {
  switch (s) {
    case StopKind::kToolCalls: return "tool_use";
    case StopKind::kMaxTokens: return "max_tokens";
    default: return "end_turn";
  }
}

Json ToolUseBlock(const ToolCall& c) {
  Json input = Json::parse(c.arguments_json, nullptr, false);
  if (input.is_discarded() || !input.is_object()) input = Json::object();
  return Json{{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", std::move(input)}};
}

Json UsageJson(const ChatReply& r) {
  return Json{{"input_tokens", r.prompt_tokens - r.reused_tokens},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", r.reused_tokens},
              {"output_tokens", r.completion_tokens}};
}

// Emits the event sequence. message_start goes out with the first event, so a request the
// engine refuses before producing anything still gets a plain HTTP error.
class BlockStreamer : public ReplyObserver {
 public:
  BlockStreamer(SseStream& sse, Json message_start) : sse_(sse), message_start_(std::move(message_start)) {}
  void Emit(const char* type, Json data) {
    if (!sse_.started()) Send("message_start", std::move(message_start_));
    Send(type, std::move(data));
  }
  void Send(const char* type, Json data) {
    Json e{{"type", type}};
    for (auto& [k, v] : data.items()) e[k] = v;
    sse_.Event(e, type);
  }
  void OpenText() {
    if (text_open_) return;
    text_open_ = true;
    Emit("content_block_start", Json{{"index", index_}, {"content_block", Json{{"type", "text"}, {"text", ""}}}});
  }
  void CloseText() {
    if (!text_open_) return;
    Emit("content_block_stop", Json{{"index", index_}});
    text_open_ = false;
    ++index_;
  }
  void OnTextDelta(std::string_view text, const std::vector<TokenRecord>&) override {
    OpenText();
    Emit("content_block_delta",
         Json{{"index", index_}, {"delta", Json{{"type", "text_delta"}, {"text", std::string(text)}}}});
  }
  void ToolUse(const ToolCall& c) {
    Json start = ToolUseBlock(c);
    start["input"] = Json::object();
    Emit("content_block_start", Json{{"index", index_}, {"content_block", start}});
    Emit("content_block_delta", Json{{"index", index_},
                                     {"delta", Json{{"type", "input_json_delta"},
                                                    {"partial_json", ToolUseBlock(c)["input"].dump()}}}});
    Emit("content_block_stop", Json{{"index", index_}});
    ++index_;
  }
  bool text_open() const { return text_open_; }

 private:
  SseStream& sse_;
  Json message_start_;
  bool text_open_ = false;
  int index_ = 0;
};

}  // namespace

void SendAnthropicError(HttpResponder& out, const absl::Status& status) {
  int code = HttpStatusFor(status);
  const char* type = code == 400 ? "invalid_request_error"
                     : code == 404 ? "not_found_error"
                     : code == 429 ? "rate_limit_error"
                     : code == 503 ? "overloaded_error"
                                   : "api_error";
  Json body{{"type", "error"}, {"error", Json{{"type", type}, {"message", std::string(status.message())}}}};
  out.Send(code, "application/json", Dump(body));
}

void HandleMessages(ChatService& service, const HttpRequest& http, const std::string& session_id,
                    HttpResponder& out) {
  absl::StatusOr<ChatRequest> parsed = ParseRequest(http.body, true);
  if (!parsed.ok()) return SendAnthropicError(out, parsed.status());
  ChatRequest req = std::move(*parsed);
  req.session_id = session_id;
  req.reply_id = NewWireId("msg_");
  const std::string model = req.model.empty() ? service.ModelName() : req.model;
  if (!req.stream) {
    absl::StatusOr<ChatReply> reply = service.Complete(req, nullptr);
    if (!reply.ok()) return SendAnthropicError(out, reply.status());
    Json content = Json::array();
    if (!reply->text.empty()) content.push_back(Json{{"type", "text"}, {"text", reply->text}});
    for (const ToolCall& c : reply->tool_calls) content.push_back(ToolUseBlock(c));
    Json body{{"id", reply->id}, {"type", "message"}, {"role", "assistant"}, {"model", model},
              {"content", std::move(content)}, {"stop_reason", StopReason(reply->stop)},
              {"stop_sequence", nullptr}, {"usage", UsageJson(*reply)}};
    return out.Send(200, "application/json", Dump(body));
  }
  SseStream sse(out);
  const uint32_t input_tokens = service.CountTokens(req);
  BlockStreamer streamer(sse, Json{{"message", Json{{"id", req.reply_id}, {"type", "message"}, {"role", "assistant"},
                                                    {"model", model}, {"content", Json::array()},
                                                    {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                                                    {"usage", Json{{"input_tokens", input_tokens}, {"output_tokens", 0}}}}}});
  absl::StatusOr<ChatReply> reply = service.Complete(req, &streamer);
  if (!reply.ok()) {
    if (!sse.started()) return SendAnthropicError(out, reply.status());
    int code = HttpStatusFor(reply.status());
    streamer.Emit("error", Json{{"error", Json{{"type", code == 400 ? "invalid_request_error" : "api_error"},
                                               {"message", std::string(reply.status().message())}}}});
    return sse.End();
  }
  if (reply->text.empty() && reply->tool_calls.empty()) streamer.OpenText();
  streamer.CloseText();
  for (const ToolCall& c : reply->tool_calls) streamer.ToolUse(c);
  streamer.Emit("message_delta", Json{{"delta", Json{{"stop_reason", StopReason(reply->stop)}, {"stop_sequence", nullptr}}},
                                      {"usage", Json{{"output_tokens", reply->completion_tokens}}}});
  streamer.Emit("message_stop", Json::object());
  sse.End();
}

void HandleCountTokens(ChatService& service, const HttpRequest& http, HttpResponder& out) {
  absl::StatusOr<ChatRequest> parsed = ParseRequest(http.body, false);
  if (!parsed.ok()) return SendAnthropicError(out, parsed.status());
  out.Send(200, "application/json", Dump(Json{{"input_tokens", service.CountTokens(*parsed)}}));
}

}  // namespace flotilla::worker::wire
