// OpenAI Responses: the request body of POST /v1/responses.
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "wire_json.h"
#include "wire_requests.h"

namespace flotilla::worker::wire {
namespace {

const std::vector<std::string> kTextParts = {"input_text", "output_text", "text"};

absl::Status ParseInputItem(const InJson& item, const std::string& path, ChatRequest* req) {
  if (!item.is_object()) return Invalid(path, "expected an object");
  std::string type, role;
  RETURN_IF_ERROR(ReadString(item, "type", path + ".type", &type));
  RETURN_IF_ERROR(ReadString(item, "role", path + ".role", &role));
  if (type.empty() && !role.empty()) type = "message";
  if (type == "message") {
    auto c = item.find("content");
    ASSIGN_OR_RETURN(std::string text,
                     ReadTextContent(c == item.end() ? InJson() : *c, path + ".content", kTextParts));
    ChatMessage m;
    if (role == "system" || role == "developer") {
      if (req->messages.empty()) {
        if (!req->system.empty()) req->system += "\n\n";
        req->system += text;
        return absl::OkStatus();
      }
      m.role = ChatMessage::Role::kSystem;
    } else if (role == "user") {
      m.role = ChatMessage::Role::kUser;
    } else if (role == "assistant") {
      m.role = ChatMessage::Role::kAssistant;
    } else {
      return Invalid(path + ".role", absl::StrCat("unknown role '", role,
                                                  "' (expected user, assistant, system or developer)"));
    }
    m.content = std::move(text);
    req->messages.push_back(std::move(m));
    return absl::OkStatus();
  }
  if (type == "function_call") {
    ToolCall call;
    RETURN_IF_ERROR(ReadString(item, "call_id", path + ".call_id", &call.id));
    RETURN_IF_ERROR(ReadString(item, "name", path + ".name", &call.name));
    RETURN_IF_ERROR(ReadString(item, "arguments", path + ".arguments", &call.arguments_json));
    if (call.name.empty()) return Invalid(path + ".name", "required");
    if (call.arguments_json.empty()) call.arguments_json = "{}";
    // Calls the model made together follow its message as separate items: merge them back.
    if (req->messages.empty() || req->messages.back().role != ChatMessage::Role::kAssistant) {
      ChatMessage m;
      m.role = ChatMessage::Role::kAssistant;
      req->messages.push_back(std::move(m));
    }
    req->messages.back().tool_calls.push_back(std::move(call));
    return absl::OkStatus();
  }
  if (type == "function_call_output") {
    ChatMessage m;
    m.role = ChatMessage::Role::kTool;
    RETURN_IF_ERROR(ReadString(item, "call_id", path + ".call_id", &m.tool_call_id));
    if (m.tool_call_id.empty()) return Invalid(path + ".call_id", "required");
    auto o = item.find("output");
    ASSIGN_OR_RETURN(m.content, ReadTextContent(o == item.end() ? InJson() : *o, path + ".output", kTextParts));
    req->messages.push_back(std::move(m));
    return absl::OkStatus();
  }
  if (type == "reasoning") return absl::OkStatus();  // this model has no hidden reasoning
  return Invalid(path + ".type", absl::StrCat("unsupported input item type '", type,
                                              "' (supported: message, function_call, "
                                              "function_call_output, reasoning)"));
}

}  // namespace

absl::StatusOr<ChatRequest> ParseResponsesRequest(const std::string& text) {
  ASSIGN_OR_RETURN(InJson body, ParseBody(text));
  ChatRequest req;
  RETURN_IF_ERROR(ReadString(body, "model", "model", &req.model));
  RETURN_IF_ERROR(ReadString(body, "instructions", "instructions", &req.system));
  RETURN_IF_ERROR(ReadString(body, "previous_response_id", "previous_response_id", &req.previous_response_id));
  auto input = body.find("input");
  if (input == body.end() || input->is_null()) return Invalid("input", "required");
  if (input->is_string()) {
    ChatMessage m;
    m.role = ChatMessage::Role::kUser;
    m.content = input->get<std::string>();
    req.messages.push_back(std::move(m));
  } else if (input->is_array()) {
    for (size_t i = 0; i < input->size(); ++i) {
      RETURN_IF_ERROR(ParseInputItem((*input)[i], absl::StrCat("input[", i, "]"), &req));
    }
  } else {
    return Invalid("input", "expected a string or an array of input items");
  }
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return Invalid("tools", "expected an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const InJson& t = (*tools)[i];
      std::string path = absl::StrCat("tools[", i, "]");
      if (!t.is_object()) return Invalid(path, "expected an object");
      std::string type;
      RETURN_IF_ERROR(ReadString(t, "type", path + ".type", &type));
      if (type != "function") continue;  // hosted tools (web search...) do not exist here
      ToolSpec spec;
      RETURN_IF_ERROR(ReadString(t, "name", path + ".name", &spec.name));
      if (spec.name.empty()) return Invalid(path + ".name", "required");
      RETURN_IF_ERROR(ReadString(t, "description", path + ".description", &spec.description));
      auto p = t.find("parameters");
      spec.parameters_json = (p == t.end() || p->is_null()) ? "{}" : p->dump();
      req.tools.push_back(std::move(spec));
    }
  }
  RETURN_IF_ERROR(ReadFloat(body, "temperature", "temperature", 0, 2, &req.temperature));
  RETURN_IF_ERROR(ReadFloat(body, "top_p", "top_p", 0, 1, &req.top_p));
  RETURN_IF_ERROR(ReadUint(body, "max_output_tokens", "max_output_tokens", 1, 1u << 30, &req.max_tokens));
  RETURN_IF_ERROR(ReadUint(body, "top_logprobs", "top_logprobs", 0, 20, &req.top_logprobs));
  RETURN_IF_ERROR(ReadBool(body, "stream", "stream", &req.stream));
  RETURN_IF_ERROR(ReadSeed(body, "seed", "seed", &req.seed));
  auto include = body.find("include");
  if (include != body.end() && include->is_array()) {
    for (const auto& v : *include) {
      if (v.is_string() && v.get<std::string>() == "message.output_text.logprobs") req.logprobs = true;
    }
  }
  if (req.top_logprobs > 0) req.logprobs = true;
  return req;
}

}  // namespace flotilla::worker::wire
