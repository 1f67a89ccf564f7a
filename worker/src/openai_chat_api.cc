// OpenAI Chat Completions: POST /v1/chat/completions.
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "wire_apis.h"
#include "wire_common.h"

namespace flotilla::worker::wire {
namespace {

const std::vector<std::string> kTextParts = {"text", "input_text"};

absl::Status ParseToolCalls(const InJson& m, const std::string& path, ChatMessage* msg) {
  auto it = m.find("tool_calls");
  if (it == m.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return Invalid(path, "expected an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const InJson& c = (*it)[i];
    std::string cpath = absl::StrCat(path, "[", i, "]");
    if (!c.is_object()) return Invalid(cpath, "expected an object");
    ToolCall call;
    RETURN_IF_ERROR(ReadString(c, "id", cpath + ".id", &call.id));
    auto f = c.find("function");
    if (f == c.end() || !f->is_object()) return Invalid(cpath + ".function", "required object");
    RETURN_IF_ERROR(ReadString(*f, "name", cpath + ".function.name", &call.name));
    if (call.name.empty()) return Invalid(cpath + ".function.name", "required");
    auto args = f->find("arguments");
    if (args != f->end() && args->is_object()) {
      call.arguments_json = args->dump();
    } else {
      RETURN_IF_ERROR(ReadString(*f, "arguments", cpath + ".function.arguments", &call.arguments_json));
    }
    if (call.arguments_json.empty()) call.arguments_json = "{}";
    msg->tool_calls.push_back(std::move(call));
  }
  return absl::OkStatus();
}

absl::Status ParseMessages(const InJson& body, ChatRequest* req) {
  auto it = body.find("messages");
  if (it == body.end()) return Invalid("messages", "required");
  if (!it->is_array()) return Invalid("messages", "expected an array");
  if (it->empty()) return Invalid("messages", "must contain at least one message");
  bool leading = true;
  for (size_t i = 0; i < it->size(); ++i) {
    const InJson& m = (*it)[i];
    std::string path = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return Invalid(path, "expected an object");
    std::string role;
    RETURN_IF_ERROR(ReadString(m, "role", path + ".role", &role));
    auto content_it = m.find("content");
    InJson content = content_it == m.end() ? InJson() : *content_it;
    ASSIGN_OR_RETURN(std::string text, ReadTextContent(content, path + ".content", kTextParts));
    ChatMessage msg;
    if (role == "system" || role == "developer") {
      if (leading) {
        if (!req->system.empty()) req->system += "\n\n";
        req->system += text;
        continue;
      }
      msg.role = ChatMessage::Role::kSystem;
    } else if (role == "user") {
      msg.role = ChatMessage::Role::kUser;
    } else if (role == "assistant") {
      msg.role = ChatMessage::Role::kAssistant;
      RETURN_IF_ERROR(ParseToolCalls(m, path + ".tool_calls", &msg));
    } else if (role == "tool") {
      msg.role = ChatMessage::Role::kTool;
      RETURN_IF_ERROR(ReadString(m, "tool_call_id", path + ".tool_call_id", &msg.tool_call_id));
      if (msg.tool_call_id.empty()) return Invalid(path + ".tool_call_id", "required for a tool message");
    } else {
      return Invalid(path + ".role", absl::StrCat("unknown role '", role,
                                                  "' (expected system, developer, user, assistant or tool)"));
    }
    leading = false;
    msg.content = std::move(text);
    req->messages.push_back(std::move(msg));
  }
  return absl::OkStatus();
}

absl::Status ParseTools(const InJson& body, ChatRequest* req) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return Invalid("tools", "expected an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const InJson& t = (*it)[i];
    std::string path = absl::StrCat("tools[", i, "]");
    if (!t.is_object()) return Invalid(path, "expected an object");
    auto f = t.find("function");
    if (f == t.end() || !f->is_object()) return Invalid(path + ".function", "required object");
    ToolSpec spec;
    RETURN_IF_ERROR(ReadString(*f, "name", path + ".function.name", &spec.name));
    if (spec.name.empty()) return Invalid(path + ".function.name", "required");
    RETURN_IF_ERROR(ReadString(*f, "description", path + ".function.description", &spec.description));
    auto p = f->find("parameters");
    spec.parameters_json = (p == f->end() || p->is_null()) ? "{}" : p->dump();
    req->tools.push_back(std::move(spec));
  }
  return absl::OkStatus();
}

absl::StatusOr<ChatRequest> ParseRequest(const std::string& text, bool* include_usage) {
  ASSIGN_OR_RETURN(InJson body, ParseBody(text));
  ChatRequest req;
  RETURN_IF_ERROR(ReadString(body, "model", "model", &req.model));
  RETURN_IF_ERROR(ParseMessages(body, &req));
  RETURN_IF_ERROR(ParseTools(body, &req));
  RETURN_IF_ERROR(ReadFloat(body, "temperature", "temperature", 0, 2, &req.temperature));
  RETURN_IF_ERROR(ReadFloat(body, "top_p", "top_p", 0, 1, &req.top_p));
  RETURN_IF_ERROR(ReadUint(body, "max_tokens", "max_tokens", 1, 1u << 30, &req.max_tokens));
  RETURN_IF_ERROR(ReadUint(body, "max_completion_tokens", "max_completion_tokens", 1, 1u << 30,
                           &req.max_tokens));
  RETURN_IF_ERROR(ReadSeed(body, "seed", "seed", &req.seed));
  RETURN_IF_ERROR(ReadBool(body, "logprobs", "logprobs", &req.logprobs));
  RETURN_IF_ERROR(ReadUint(body, "top_logprobs", "top_logprobs", 0, 20, &req.top_logprobs));
  RETURN_IF_ERROR(ReadBool(body, "stream", "stream", &req.stream));
  uint32_t n = 1;
  RETURN_IF_ERROR(ReadUint(body, "n", "n", 1, 1, &n));
  auto so = body.find("stream_options");
  if (so != body.end() && so->is_object()) {
    RETURN_IF_ERROR(ReadBool(*so, "include_usage", "stream_options.include_usage", include_usage));
  }
  return req;
}

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
  absl::StatusOr<ChatRequest> parsed = ParseRequest(http.body, &include_usage);
  if (!parsed.ok()) return SendOpenAiError(out, parsed.status());
  ChatRequest req = std::move(*parsed);
  req.session_id = session_id;
  const std::string model = req.model.empty() ? service.ModelName() : req.model;
  req.reply_id = NewWireId("chatcmpl-");
  req.hf = service.hf();
  if (!req.stream) {
    absl::StatusOr<ChatReply> reply = service.Complete(req, nullptr);
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
  absl::StatusOr<ChatReply> reply = service.Complete(req, &streamer);
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
