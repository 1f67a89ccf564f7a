// OpenAI Chat Completions: POST /v1/chat/completions.
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "wire_apis.h"
#include "wire_common.h"
#include "wire_requests.h"

namespace flotilla::worker::wire {
namespace {

const char* FinishReason(StopKind s) {
  switch (s) {
    case StopKind::kToolCalls: return "tool_calls";
    case StopKind::kMaxTokens: return "length";
    default: return "stop";
  }
}

Json Usage(const ChatReply& r) {
  return Json{{"prompt_tokens", r.prompt_tokens},
              {"completion_tokens", r.completion_tokens},
              {"total_tokens", r.prompt_tokens + r.completion_tokens},
              {"prompt_tokens_details", Json{{"cached_tokens", r.reused_tokens}}}};
}

Json ToolCallsJson(const ChatReply& r, bool with_index) {
  Json calls = Json::array();
  for (size_t i = 0; i < r.tool_calls.size(); ++i) {
    Json c;
    if (with_index) c["index"] = i;
    c["id"] = r.tool_calls[i].id;
    c["type"] = "function";
    c["function"] = Json{{"name", r.tool_calls[i].name}, {"arguments", r.tool_calls[i].arguments_json}};
    calls.push_back(std::move(c));
  }
  return calls;
}

class ChunkStreamer : public ReplyObserver {
 public:
  ChunkStreamer(SseStream& sse, const ChatRequest& req, std::string id, std::string model, int64_t created)
      : sse_(sse), req_(req), id_(std::move(id)), model_(std::move(model)), created_(created) {}
  Json Chunk(Json delta, Json logprobs, Json finish) {
    Json choice{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
                {"finish_reason", std::move(finish)}};
    return Json{{"id", id_}, {"object", "chat.completion.chunk"}, {"created", created_},
                {"model", model_}, {"choices", Json::array({std::move(choice)})}};
  }
  void Begin() {
    if (begun_) return;
    begun_ = true;
    sse_.Event(Chunk(Json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
  }
  void OnTextDelta(std::string_view text, const std::vector<TokenRecord>& tokens) override {
    Begin();
    Json lp = req_.logprobs ? Json{{"content", LogprobEntries(tokens, req_.top_logprobs, req_.hf)}} : Json();
    sse_.Event(Chunk(Json{{"content", std::string(text)}}, std::move(lp), nullptr));
  }

 private:
  SseStream& sse_;
  const ChatRequest& req_;
  std::string id_, model_;
  int64_t created_;
  bool begun_ = false;
};

}  // namespace

void SendOpenAiError(HttpResponder& out, const absl::Status& status) {
  int code = HttpStatusFor(status);
  const char* type = code == 400 ? "invalid_request_error" : code == 404 ? "not_found_error" : "server_error";
  std::string message(status.message());
  std::string param;
  if (code == 400) {
    size_t colon = message.find(':');
    if (colon != std::string::npos) param = message.substr(0, colon);
  }
  Json err{{"message", message}, {"type", type},
           {"param", param.empty() ? Json() : Json(param)}, {"code", nullptr}};
  out.Send(code, "application/json", Dump(Json{{"error", std::move(err)}}));
}

void HandleChatCompletions(ChatService& service, const HttpRequest& http,
                           const std::string& session_id, HttpResponder& out) {
  bool include_usage = false;
  absl::StatusOr<ChatRequest> parsed = ParseChatCompletionsRequest(http.body, &include_usage);
  if (!parsed.ok()) return SendOpenAiError(out, parsed.status());
  ChatRequest req = std::move(*parsed);
  req.session_id = session_id;
  const std::string model = req.model.empty() ? service.ModelName() : req.model;
  req.reply_id = NewWireId("chatcmpl-");
  req.hf = service.hf();
  if (!req.stream) {
    absl::StatusOr<ChatReply> reply = FailIfInterrupted(service.Complete(req, nullptr));
    if (!reply.ok()) return SendOpenAiError(out, reply.status());
    Json message{{"role", "assistant"},
                 {"content", reply->text.empty() && !reply->tool_calls.empty() ? Json() : Json(reply->text)}};
    if (!reply->tool_calls.empty()) message["tool_calls"] = ToolCallsJson(*reply, false);
    Json lp = req.logprobs
                  ? Json{{"content", LogprobEntries(ContentTokens(reply->tokens, req.hf), req.top_logprobs, req.hf)}}
                  : Json();
    Json choice{{"index", 0}, {"message", std::move(message)}, {"logprobs", std::move(lp)},
                {"finish_reason", FinishReason(reply->stop)}};
    Json body{{"id", reply->id}, {"object", "chat.completion"},
              {"created", reply->created_unix_s}, {"model", model},
              {"choices", Json::array({std::move(choice)})}, {"usage", Usage(*reply)},
              {"system_fingerprint", "flotilla"}};
    return out.Send(200, "application/json", Dump(body));
  }
  SseStream sse(out);
  const std::string& id = req.reply_id;
  ChunkStreamer streamer(sse, req, id, model, UnixSeconds());
  absl::StatusOr<ChatReply> reply = FailIfInterrupted(service.Complete(req, &streamer));
  if (!reply.ok()) {
    if (!sse.started()) return SendOpenAiError(out, reply.status());
    sse.Event(Json{{"error", Json{{"message", std::string(reply.status().message())},
                                  {"type", "server_error"}}}});
    sse.Raw("data: [DONE]");
    return sse.End();
  }
  streamer.Begin();
  if (!reply->tool_calls.empty()) {
    sse.Event(streamer.Chunk(Json{{"tool_calls", ToolCallsJson(*reply, true)}}, nullptr, nullptr));
  }
  sse.Event(streamer.Chunk(Json::object(), nullptr, FinishReason(reply->stop)));
  if (include_usage) {
    Json usage_chunk{{"id", id}, {"object", "chat.completion.chunk"}, {"created", reply->created_unix_s},
                     {"model", model}, {"choices", Json::array()}, {"usage", Usage(*reply)}};
    sse.Event(usage_chunk);
  }
  sse.Raw("data: [DONE]");
  sse.End();
}

}  // namespace flotilla::worker::wire
