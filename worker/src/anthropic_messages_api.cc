// Anthropic Messages: POST /v1/messages and /v1/messages/count_tokens.
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "wire_apis.h"
#include "wire_common.h"
#include "wire_requests.h"

namespace flotilla::worker::wire {
namespace {

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
  absl::StatusOr<ChatRequest> parsed = ParseMessagesRequest(http.body, true);
  if (!parsed.ok()) return SendAnthropicError(out, parsed.status());
  ChatRequest req = std::move(*parsed);
  req.session_id = session_id;
  req.reply_id = NewWireId("msg_");
  const std::string model = req.model.empty() ? service.ModelName() : req.model;
  if (!req.stream) {
    absl::StatusOr<ChatReply> reply = FailIfInterrupted(service.Complete(req, nullptr));
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
  absl::StatusOr<ChatReply> reply = FailIfInterrupted(service.Complete(req, &streamer));
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
  absl::StatusOr<ChatRequest> parsed = ParseMessagesRequest(http.body, false);
  if (!parsed.ok()) return SendAnthropicError(out, parsed.status());
  out.Send(200, "application/json", Dump(Json{{"input_tokens", service.CountTokens(*parsed)}}));
}

}  // namespace flotilla::worker::wire
