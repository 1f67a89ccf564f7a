// OpenAI Responses: POST /v1/responses (the only API Codex speaks).
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "wire_apis.h"
#include "wire_common.h"
#include "wire_requests.h"

namespace flotilla::worker::wire {
namespace {

class ResponseBuilder {
 public:
  ResponseBuilder(const ChatRequest& req, std::string model)
      : req_(req), model_(std::move(model)), created_(UnixSeconds()),
        message_id_(NewWireId("msg_")) {}

  Json Response(const char* status, const ChatReply* reply) const {
    Json output = Json::array();
    if (reply != nullptr) {
      if (!reply->text.empty() || reply->tool_calls.empty()) output.push_back(MessageItem(*reply, "completed"));
      for (size_t i = 0; i < reply->tool_calls.size(); ++i) output.push_back(CallItem(*reply, i, "completed"));
    }
    Json r{{"id", req_.reply_id}, {"object", "response"}, {"created_at", created_},
           {"status", status}, {"error", nullptr}, {"incomplete_details", nullptr},
           {"instructions", req_.system.empty() ? Json() : Json(req_.system)},
           {"max_output_tokens", req_.max_tokens}, {"model", model_}, {"output", std::move(output)},
           {"parallel_tool_calls", true},
           {"previous_response_id", req_.previous_response_id.empty() ? Json() : Json(req_.previous_response_id)},
           {"temperature", req_.temperature}, {"top_p", req_.top_p}, {"tool_choice", "auto"},
           {"tools", Json::array()}, {"text", Json{{"format", Json{{"type", "text"}}}}},
           {"metadata", Json::object()}, {"usage", nullptr}};
    if (reply != nullptr) {
      if (reply->stop == StopKind::kMaxTokens) {
        r["status"] = "incomplete";
        r["incomplete_details"] = Json{{"reason", "max_output_tokens"}};
      }
      r["usage"] = Json{{"input_tokens", reply->prompt_tokens},
                        {"input_tokens_details", Json{{"cached_tokens", reply->reused_tokens}}},
                        {"output_tokens", reply->completion_tokens},
                        {"output_tokens_details", Json{{"reasoning_tokens", 0}}},
                        {"total_tokens", reply->prompt_tokens + reply->completion_tokens}};
    }
    return r;
  }

  Json TextPart(const std::string& text, const std::vector<TokenRecord>& tokens) const {
    Json part{{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}};
    if (req_.logprobs) part["logprobs"] = LogprobEntries(tokens, req_.top_logprobs, req_.hf);
    return part;
  }

  Json MessageItem(const ChatReply& reply, const char* status) const {
    return Json{{"type", "message"}, {"id", message_id_}, {"status", status}, {"role", "assistant"},
                {"content", Json::array({TextPart(reply.text, ContentTokens(reply.tokens, req_.hf))})}};
  }

  Json CallItem(const ChatReply& reply, size_t i, const char* status) const {
    const ToolCall& c = reply.tool_calls[i];
    return Json{{"type", "function_call"}, {"id", "fc_" + c.id}, {"call_id", c.id},
                {"name", c.name}, {"arguments", c.arguments_json}, {"status", status}};
  }

  const std::string& message_id() const { return message_id_; }

 private:
  const ChatRequest& req_;
  std::string model_;
  int64_t created_;
  std::string message_id_;
};

class EventStreamer : public ReplyObserver {
 public:
  EventStreamer(SseStream& sse, const ChatRequest& req, const ResponseBuilder& builder)
      : sse_(sse), req_(req), builder_(builder) {}

  void Emit(const char* type, Json data) {
    if (!begun_) {  // response.created goes out with the first event (see HandleResponses)
      begun_ = true;
      Emit("response.created", Json{{"response", builder_.Response("in_progress", nullptr)}});
      Emit("response.in_progress", Json{{"response", builder_.Response("in_progress", nullptr)}});
    }
    Json event{{"type", type}, {"sequence_number", seq_++}};
    for (auto& [k, v] : data.items()) event[k] = v;
    sse_.Event(event, type);
  }
  void OpenMessage() {
    if (message_open_) return;
    message_open_ = true;
    Emit("response.output_item.added",
         Json{{"output_index", 0},
              {"item", Json{{"type", "message"}, {"id", builder_.message_id()}, {"status", "in_progress"},
                            {"role", "assistant"}, {"content", Json::array()}}}});
    Emit("response.content_part.added",
         Json{{"item_id", builder_.message_id()}, {"output_index", 0}, {"content_index", 0},
              {"part", Json{{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}}});
  }
  void OnTextDelta(std::string_view text, const std::vector<TokenRecord>& tokens) override {
    OpenMessage();
    Json data{{"item_id", builder_.message_id()}, {"output_index", 0}, {"content_index", 0},
              {"delta", std::string(text)}};
    data["logprobs"] = req_.logprobs ? LogprobEntries(tokens, req_.top_logprobs, req_.hf) : Json::array();
    Emit("response.output_text.delta", std::move(data));
  }
  void Finish(const ChatReply& reply) {
    size_t index = 0;
    if (message_open_ || reply.tool_calls.empty()) {
      OpenMessage();
      Json part = builder_.TextPart(reply.text, ContentTokens(reply.tokens, req_.hf));
      Emit("response.output_text.done", Json{{"item_id", builder_.message_id()}, {"output_index", 0},
                                             {"content_index", 0}, {"text", reply.text}});
      Emit("response.content_part.done", Json{{"item_id", builder_.message_id()}, {"output_index", 0},
                                              {"content_index", 0}, {"part", part}});
      Emit("response.output_item.done",
           Json{{"output_index", 0}, {"item", builder_.MessageItem(reply, "completed")}});
      index = 1;
    }
    for (size_t i = 0; i < reply.tool_calls.size(); ++i, ++index) {
      Json item = builder_.CallItem(reply, i, "in_progress");
      item["arguments"] = "";
      Emit("response.output_item.added", Json{{"output_index", index}, {"item", item}});
      const std::string item_id = "fc_" + reply.tool_calls[i].id;
      Emit("response.function_call_arguments.delta",
           Json{{"item_id", item_id}, {"output_index", index}, {"delta", reply.tool_calls[i].arguments_json}});
      Emit("response.function_call_arguments.done",
           Json{{"item_id", item_id}, {"output_index", index}, {"arguments", reply.tool_calls[i].arguments_json}});
      Emit("response.output_item.done",
           Json{{"output_index", index}, {"item", builder_.CallItem(reply, i, "completed")}});
    }
    const bool incomplete = reply.stop == StopKind::kMaxTokens;
    Emit(incomplete ? "response.incomplete" : "response.completed",
         Json{{"response", builder_.Response("completed", &reply)}});
  }

 private:
  SseStream& sse_;
  const ChatRequest& req_;
  const ResponseBuilder& builder_;
  int64_t seq_ = 0;
  bool begun_ = false;
  bool message_open_ = false;
};

}  // namespace

void HandleResponses(ChatService& service, const HttpRequest& http, const std::string& session_id,
                     HttpResponder& out) {
  absl::StatusOr<ChatRequest> parsed = ParseResponsesRequest(http.body);
  if (!parsed.ok()) return SendOpenAiError(out, parsed.status());
  ChatRequest req = std::move(*parsed);
  req.session_id = session_id;
  req.reply_id = NewWireId("resp_");
  req.hf = service.hf();
  ResponseBuilder builder(req, req.model.empty() ? service.ModelName() : req.model);
  if (!req.stream) {
    absl::StatusOr<ChatReply> reply = FailIfInterrupted(service.Complete(req, nullptr));
    if (!reply.ok()) return SendOpenAiError(out, reply.status());
    return out.Send(200, "application/json", Dump(builder.Response("completed", &*reply)));
  }
  // The stream opens with the first event, so a request refused before any token (a
  // conversation longer than the context window, say) gets a plain HTTP error that clients do
  // not retry.
  SseStream sse(out);
  EventStreamer streamer(sse, req, builder);
  absl::StatusOr<ChatReply> reply = FailIfInterrupted(service.Complete(req, &streamer));
  if (!reply.ok()) {
    if (!sse.started()) return SendOpenAiError(out, reply.status());
    Json failed = builder.Response("failed", nullptr);
    failed["error"] = Json{{"code", "server_error"}, {"message", std::string(reply.status().message())}};
    streamer.Emit("response.failed", Json{{"response", failed}});
    return sse.End();
  }
  streamer.Finish(*reply);
  sse.End();
}

}  // namespace flotilla::worker::wire
