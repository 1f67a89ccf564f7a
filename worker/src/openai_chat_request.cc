// OpenAI Chat Completions: the request body of POST /v1/chat/completions.
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "wire_json.h"
#include "wire_requests.h"

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

}  // namespace

absl::StatusOr<ChatRequest> ParseChatCompletionsRequest(const std::string& text, bool* include_usage) {
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
  // vLLM's extension: generate until max_tokens whatever the model's end tokens.
  RETURN_IF_ERROR(ReadBool(body, "ignore_eos", "ignore_eos", &req.ignore_stop));
  uint32_t n = 1;
  RETURN_IF_ERROR(ReadUint(body, "n", "n", 1, 1, &n));
  auto so = body.find("stream_options");
  if (so != body.end() && so->is_object()) {
    RETURN_IF_ERROR(ReadBool(*so, "include_usage", "stream_options.include_usage", include_usage));
  }
  return req;
}

}  // namespace flotilla::worker::wire
