// The HTTP layer over a scripted token source: routing, session binding, each API's request
// validation and error shape, and response and stream framing.
#include "flotilla/worker/wire_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "testing/http_client.h"
#include "nlohmann/json.hpp"
#include "scripted_generator.h"

namespace flotilla::worker {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using flotilla::testing::HttpCall;
using testing::ScriptedGenerator;

std::vector<int32_t> CallReply(const std::string& text, const std::string& call) {
  std::vector<int32_t> t = inference::Encode(text);
  t.push_back(inference::kToolCallBegin);
  for (int32_t x : inference::Encode(call)) t.push_back(x);
  t.push_back(inference::kToolCallEnd);
  t.push_back(inference::kEndTurn);
  return t;
}

// The data payloads of an SSE body, with their event names.
std::vector<std::pair<std::string, json>> Events(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  std::string event;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (absl::StartsWith(line, "event: ")) event = std::string(line.substr(7));
    if (absl::StartsWith(line, "data: ")) {
      std::string data(line.substr(6));
      out.emplace_back(event, data == "[DONE]" ? json("[DONE]") : json::parse(data));
      event.clear();
    }
  }
  return out;
}

class WireApiTest : public ::testing::Test {
 protected:
  WireApiTest() : service_(&gen_, Options()), api_(&service_) {
    auto s = ServeWireApi("127.0.0.1:0", &api_);
    EXPECT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  static ChatServiceOptions Options() {
    ChatServiceOptions o;
    o.experts_per_token = ScriptedGenerator::kWidth;
    return o;
  }
  flotilla::testing::HttpResult Post(const std::string& path, const json& body,
                           const std::map<std::string, std::string>& headers = {}) {
    return HttpCall(server_->port(), "POST", path, body.dump(), headers);
  }
  ScriptedGenerator gen_;
  ChatService service_;
  WireApi api_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(WireApiTest, ChatCompletionsWithToolCallAndLogprobs) {
  gen_.AddReply(CallReply("hm", R"({"name": "bash", "arguments": {"cmd": "ls"}})"));
  json req = {{"model", "m"},
              {"messages", {{{"role", "system"}, {"content", "sys"}}, {{"role", "user"}, {"content", "hi"}}}},
              {"tools", {{{"type", "function"}, {"function", {{"name", "bash"}, {"parameters", {{"type", "object"}}}}}}}},
              {"logprobs", true}, {"top_logprobs", 2}};
  auto r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hm");
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "bash");
  EXPECT_EQ(json::parse(j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"cmd", "ls"}}));
  const json& lp = j["choices"][0]["logprobs"]["content"];
  const size_t generated = j["usage"]["completion_tokens"].get<size_t>();
  ASSERT_EQ(generated, 2u + 1 + 44 + 1 + 1);  // "hm", call begin, call JSON, call end, <end>
  ASSERT_EQ(lp.size(), generated - 1);  // all but the closing <end>
  EXPECT_EQ(lp[0]["token"], "h");
  EXPECT_EQ(lp[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(j["usage"]["prompt_tokens"].get<uint32_t>(), gen_.calls()[0].new_tokens.size());
}

TEST_F(WireApiTest, ChatCompletionsStreamsChunksThenDone) {
  gen_.AddTextReply("hello world");
  json req = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", true},
              {"stream_options", {{"include_usage", true}}}};
  auto r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/event-stream");
  auto events = Events(r.body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back().second, "[DONE]");
  std::string text;
  std::string finish;
  for (auto& [name, e] : events) {
    if (!e.is_object() || e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(text, "hello world");
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(events[events.size() - 2].second["usage"]["completion_tokens"], 12);
}

TEST_F(WireApiTest, ErrorsUseEachApisShape) {
  auto r = HttpCall(server_->port(), "POST", "/v1/chat/completions", "{not json");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "invalid_request_error");
  r = Post("/v1/chat/completions", {{"messages", {{{"role", "robot"}, {"content", "x"}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(json::parse(r.body)["error"]["message"].get<std::string>(), HasSubstr("messages[0].role"));
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "messages[0].role");
  r = Post("/v1/messages", {{"messages", {{{"role", "user"}, {"content", "x"}}}}});
  EXPECT_EQ(r.status, 400);
  json a = json::parse(r.body);
  EXPECT_EQ(a["type"], "error");
  EXPECT_EQ(a["error"]["type"], "invalid_request_error");
  EXPECT_EQ(a["error"]["message"], "max_tokens: field required");
  r = Post("/v1/responses", {{"input", {{{"type", "bogus"}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(json::parse(r.body)["error"]["message"].get<std::string>(), HasSubstr("input[0].type"));
  r = Post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"temperature", 9}});
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(json::parse(r.body)["error"]["message"].get<std::string>(), HasSubstr("temperature"));
  r = HttpCall(server_->port(), "GET", "/v1/nothing");
  EXPECT_EQ(r.status, 404);
  r = HttpCall(server_->port(), "GET", "/v1/chat/completions");
  EXPECT_EQ(r.status, 400);
  r = HttpCall(server_->port(), "GET", "/v1/models");
  EXPECT_EQ(json::parse(r.body)["data"][0]["id"], "scripted");
}

// A streamed request the engine refuses before its first token (here: longer than the context
// window) gets each API's plain HTTP error, which clients report instead of retrying a stream.
TEST_F(WireApiTest, StreamRefusedBeforeTheFirstTokenIsAnHttpError) {
  gen_.set_context_limit(16);
  const std::string long_text(64, 'x');
  auto r = Post("/v1/chat/completions",
                {{"stream", true}, {"messages", {{{"role", "user"}, {"content", long_text}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(json::parse(r.body)["error"]["message"].get<std::string>(), HasSubstr("context window of 16 tokens"));
  r = Post("/v1/responses", {{"stream", true}, {"input", long_text}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "invalid_request_error");
  EXPECT_THAT(json::parse(r.body)["error"]["message"].get<std::string>(), HasSubstr("context window of 16 tokens"));
  r = Post("/v1/messages", {{"stream", true}, {"max_tokens", 8}, {"messages", {{{"role", "user"}, {"content", long_text}}}}});
  EXPECT_EQ(r.status, 400);
  json a = json::parse(r.body);
  EXPECT_EQ(a["type"], "error");
  EXPECT_EQ(a["error"]["type"], "invalid_request_error");
  EXPECT_THAT(a["error"]["message"].get<std::string>(), HasSubstr("context window of 16 tokens"));
}

TEST_F(WireApiTest, AnthropicMessagesToolUseRoundTripKeepsOneSession) {
  gen_.AddReply(CallReply("", R"({"name": "bash", "arguments": {"cmd": "pwd"}})"));
  gen_.AddTextReply("fine");
  json req = {{"model", "m"}, {"max_tokens", 50}, {"system", {{{"type", "text"}, {"text", "sys"}}}},
              {"tools", {{{"name", "bash"}, {"description", "d"}, {"input_schema", {{"type", "object"}}}}}},
              {"messages", {{{"role", "user"}, {"content", "where am I"}}}}};
  auto r = Post("/s/abc/v1/messages", req);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["stop_reason"], "tool_use");
  ASSERT_EQ(j["content"].size(), 1u);
  EXPECT_EQ(j["content"][0]["type"], "tool_use");
  EXPECT_EQ(j["content"][0]["input"], json({{"cmd", "pwd"}}));
  req["messages"].push_back({{"role", "assistant"}, {"content", j["content"]}});
  req["messages"].push_back({{"role", "user"}, {"content", {{{"type", "tool_result"},
                                                             {"tool_use_id", j["content"][0]["id"]},
                                                             {"content", "/root"}}}}});
  req["stream"] = true;
  r = Post("/v1/messages", req, {{"x-api-key", "session-abc"}});
  ASSERT_EQ(r.status, 200);
  auto events = Events(r.body);
  std::vector<std::string> names;
  std::string text;
  for (auto& [name, e] : events) {
    names.push_back(name);
    EXPECT_EQ(e["type"], name);
    if (name == "content_block_delta") text += e["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                             "content_block_delta", "content_block_stop", "message_delta",
                                             "message_stop"}));
  EXPECT_EQ(text, "fine");
  auto traj = service_.Trajectory("abc");
  ASSERT_TRUE(traj.ok());
  EXPECT_EQ(traj->segments_size(), 1);
  EXPECT_EQ(gen_.calls()[1].sequence_id, "seq-0");
  auto count = Post("/v1/messages/count_tokens", req);
  EXPECT_EQ(count.status, 200);
  EXPECT_GT(json::parse(count.body)["input_tokens"].get<int>(), 20);
}

TEST_F(WireApiTest, ResponsesFunctionCallStreamAndChaining) {
  gen_.AddReply(CallReply("x", R"({"name": "shell", "arguments": {"command": ["ls"]}})"));
  gen_.AddTextReply("ok");
  json req = {{"model", "m"}, {"instructions", "be good"}, {"input", "list"}, {"stream", true},
              {"tools", {{{"type", "function"}, {"name", "shell"}, {"parameters", {{"type", "object"}}}}}}};
  auto r = Post("/v1/responses", req);
  ASSERT_EQ(r.status, 200);
  auto events = Events(r.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().first, "response.created");
  EXPECT_EQ(events.back().first, "response.completed");
  json done = events.back().second["response"];
  ASSERT_EQ(done["output"].size(), 2u);
  EXPECT_EQ(done["output"][1]["type"], "function_call");
  std::string call_id = done["output"][1]["call_id"];
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].second["sequence_number"], i);
  // Chained: only the new input, by previous_response_id.
  json next = {{"previous_response_id", done["id"]},
               {"input", {{{"type", "function_call_output"}, {"call_id", call_id}, {"output", "a b"}}}}};
  r = Post("/v1/responses", next);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "ok");
  auto calls = gen_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].sequence_id, "seq-0");
  ChatMessage out;
  out.role = ChatMessage::Role::kTool;
  out.tool_call_id = call_id;
  out.content = "a b";
  std::vector<int32_t> expected = inference::RenderMessage(out);
  expected.push_back(inference::kAssistant);
  EXPECT_EQ(calls[1].new_tokens, expected);
}

}  // namespace
}  // namespace flotilla::worker
