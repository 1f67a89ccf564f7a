#include "flotilla/worker/remote_chat.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"

namespace flotilla::worker {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using nlohmann::json;

const char* RoleName(ChatMessage::Role r) {
  switch (r) {
    case ChatMessage::Role::kSystem: return "system";
    case ChatMessage::Role::kUser: return "user";
    case ChatMessage::Role::kAssistant: return "assistant";
    case ChatMessage::Role::kTool: return "tool";
  }
  return "user";
}

template <typename Stream>
absl::StatusOr<std::pair<int, std::string>> Exchange(Stream& stream, http::request<http::string_body>& req) {
  beast::error_code ec;
  http::write(stream, req, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("sending the request: ", ec.message()));
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(stream, buffer, parser, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("reading the reply: ", ec.message()));
  return std::make_pair(static_cast<int>(parser.get().result_int()), parser.get().body());
}

}  // namespace

bool IsEndpointUrl(const std::string& model) {
  absl::string_view m = model;
  absl::ConsumePrefix(&m, "anthropic+");
  return absl::StartsWith(m, "http://") || absl::StartsWith(m, "https://");
}

absl::StatusOr<EndpointUrl> ParseEndpointUrl(const std::string& url) {
  EndpointUrl u;
  absl::string_view scheme = url;
  u.anthropic = absl::ConsumePrefix(&scheme, "anthropic+");
  std::string rest;
  if (absl::StartsWith(scheme, "http://")) {
    rest = std::string(scheme.substr(7));
  } else if (absl::StartsWith(scheme, "https://")) {
    u.tls = true;
    rest = std::string(scheme.substr(8));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "endpoint '", url, "': expected http://HOST[:PORT][/PATH], https://... or anthropic+http(s)://..."));
  }
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  u.path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!u.path.empty() && u.path.back() == '/') u.path.pop_back();
  size_t colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']') == std::string::npos) {
    u.host = authority.substr(0, colon);
    u.port = authority.substr(colon + 1);
  } else {
    u.host = authority;
    u.port = u.tls ? "443" : "80";
  }
  if (u.host.empty()) return absl::InvalidArgumentError(absl::StrCat("endpoint '", url, "': no host"));
  for (char c : u.port) {
    if (c < '0' || c > '9') return absl::InvalidArgumentError(absl::StrCat("endpoint '", url, "': bad port '", u.port, "'"));
  }
  if (u.port.empty()) return absl::InvalidArgumentError(absl::StrCat("endpoint '", url, "': empty port"));
  return u;
}

json RemoteChatRequestBody(const std::string& model, const std::vector<ChatMessage>& messages,
                           const std::vector<ToolSpec>& tools, const ChatRequest& params) {
  json msgs = json::array();
  for (const ChatMessage& m : messages) {
    json j = {{"role", RoleName(m.role)}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      json calls = json::array();
      for (const ToolCall& c : m.tool_calls) {
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments_json}}}});
      }
      j["tool_calls"] = calls;
    }
    if (m.role == ChatMessage::Role::kTool) j["tool_call_id"] = m.tool_call_id;
    msgs.push_back(std::move(j));
  }
  json body = {{"model", model}, {"messages", msgs}, {"max_tokens", params.max_tokens},
               {"temperature", params.temperature}, {"top_p", params.top_p}, {"stream", false}};
  if (params.seed.has_value()) body["seed"] = *params.seed;
  if (!tools.empty()) {
    json ts = json::array();
    for (const ToolSpec& t : tools) {
      json schema = json::parse(t.parameters_json, nullptr, false);
      if (schema.is_discarded()) schema = json::object();
      ts.push_back({{"type", "function"},
                    {"function", {{"name", t.name}, {"description", t.description}, {"parameters", schema}}}});
    }
    body["tools"] = ts;
  }
  return body;
}

absl::StatusOr<RemoteReply> ParseRemoteChatReply(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("reply: not a JSON object");
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) {
    return absl::InvalidArgumentError("reply: choices: missing or empty");
  }
  const json& choice = j["choices"][0];
  if (!choice.is_object() || !choice.contains("message") || !choice["message"].is_object()) {
    return absl::InvalidArgumentError("reply: choices[0].message: missing");
  }
  const json& m = choice["message"];
  RemoteReply r;
  if (m.contains("content") && m["content"].is_string()) {
    r.text = m["content"].get<std::string>();
  } else if (m.contains("content") && !m["content"].is_null()) {
    return absl::InvalidArgumentError("reply: choices[0].message.content: expected a string or null");
  }
  if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
    for (size_t i = 0; i < m["tool_calls"].size(); ++i) {
      const json& c = m["tool_calls"][i];
      const std::string at = absl::StrCat("reply: choices[0].message.tool_calls[", i, "]");
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
          !c["function"].value("name", json()).is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(at, ".function.name: missing"));
      }
      ToolCall call;
      call.id = c.value("id", std::string());
      call.name = c["function"]["name"].get<std::string>();
      const json& args = c["function"].value("arguments", json("{}"));
      call.arguments_json = args.is_string() ? args.get<std::string>() : args.dump();
      r.tool_calls.push_back(std::move(call));
    }
  }
  r.finish_reason = choice.value("finish_reason", json("")).is_string() ? choice.value("finish_reason", "") : "";
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    if (u.value("prompt_tokens", json()).is_number_integer()) r.prompt_tokens = u["prompt_tokens"].get<int64_t>();
    if (u.value("completion_tokens", json()).is_number_integer()) {
      r.completion_tokens = u["completion_tokens"].get<int64_t>();
    }
  }
  return r;
}

absl::StatusOr<std::unique_ptr<RemoteChat>> RemoteChat::Create(RemoteChatOptions options) {
  ASSIGN_OR_RETURN(EndpointUrl url, ParseEndpointUrl(options.base_url));
  std::unique_ptr<RemoteChat> c(new RemoteChat(std::move(options), std::move(url)));
  if (c->options_.model.empty()) {
    auto got = c->Call("GET", "/models", "");
    if (!got.ok()) return Annotate(got.status(), absl::StrCat(c->options_.base_url, "/models"));
    json j = json::parse(got->second, nullptr, false);
    if (got->first != 200 || j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
        !j["data"][0].value("id", json()).is_string()) {
      return absl::FailedPreconditionError(absl::StrCat(c->options_.base_url, "/models: HTTP ", got->first,
                                                        ", no model listed in data[0].id; name one"));
    }
    c->options_.model = j["data"][0]["id"].get<std::string>();
  }
  return c;
}

absl::StatusOr<std::pair<int, std::string>> RemoteChat::Call(const std::string& method, const std::string& path,
                                                             const std::string& body) const {
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  beast::error_code ec;
  auto endpoints = resolver.resolve(url_.host, url_.port, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("resolving ", url_.host, ": ", ec.message()));
  http::request<http::string_body> req{http::string_to_verb(method), url_.path + path, 11};
  req.set(http::field::host, url_.host);
  req.set(http::field::user_agent, "flotilla-worker");
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  if (url_.anthropic) {
    req.set("anthropic-version", "2023-06-01");
    if (!options_.api_key.empty()) req.set("x-api-key", options_.api_key);
  } else if (!options_.api_key.empty()) {
    req.set(http::field::authorization, "Bearer " + options_.api_key);
  }
  req.body() = body;
  req.prepare_payload();
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  if (!url_.tls) {
    beast::tcp_stream stream(io);
    stream.expires_after(timeout);
    stream.connect(endpoints, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("connecting to ", url_.host, ":", url_.port, ": ", ec.message()));
    return Exchange(stream, req);
  }
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  ctx.set_default_verify_paths();
  ctx.set_verify_mode(asio::ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> stream(io, ctx);
  if (!SSL_set_tlsext_host_name(stream.native_handle(), url_.host.c_str())) {
    return absl::UnavailableError(absl::StrCat("TLS server name ", url_.host, ": rejected"));
  }
  stream.set_verify_callback(asio::ssl::host_name_verification(url_.host));
  beast::get_lowest_layer(stream).expires_after(timeout);
  beast::get_lowest_layer(stream).connect(endpoints, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("connecting to ", url_.host, ":", url_.port, ": ", ec.message()));
  stream.handshake(asio::ssl::stream_base::client, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("TLS handshake with ", url_.host, ": ", ec.message()));
  return Exchange(stream, req);
}

absl::StatusOr<RemoteReply> RemoteChat::Complete(const std::vector<ChatMessage>& messages,
                                                 const std::vector<ToolSpec>& tools, const ChatRequest& params) const {
  const std::string route = url_.anthropic ? "/messages" : "/chat/completions";
  const json body = url_.anthropic ? RemoteMessagesRequestBody(options_.model, messages, tools, params)
                                   : RemoteChatRequestBody(options_.model, messages, tools, params);
  ASSIGN_OR_RETURN(auto got, Call("POST", route, body.dump(-1, ' ', false, json::error_handler_t::replace)));
  if (got.first != 200) {
    std::string snippet = got.second.substr(0, 300);
    if (got.first == 400 || got.first == 422) {
      return absl::InvalidArgumentError(absl::StrCat(options_.base_url, route, ": HTTP ", got.first, ": ", snippet));
    }
    return absl::UnavailableError(absl::StrCat(options_.base_url, route, ": HTTP ", got.first, ": ", snippet));
  }
  auto reply = url_.anthropic ? ParseRemoteMessagesReply(got.second) : ParseRemoteChatReply(got.second);
  if (!reply.ok()) return Annotate(reply.status(), absl::StrCat(options_.base_url, route));
  return reply;
}

}  // namespace flotilla::worker
