// An external OpenAI- or Anthropic-compatible endpoint behind the worker (worker/remote_chat.h): the request
// body and reply parsing as pure functions, then a real endpoint (Flotilla's own worker HTTP
// serving the embedded default model, as `flotilla up` does) proxied by a second worker whose
// ChatService records the conversation as text with the endpoint's usage.
#include "flotilla/app/embedded_worker.h"
#include "flotilla/worker/remote_chat.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::worker {
namespace {

using nlohmann::json;

TEST(RemoteChatTest, ParsesEndpointUrls) {
  struct Case {
    std::string url;
    bool tls;
    std::string host, port, path;
  };
  for (const Case& c : std::vector<Case>{{"http://127.0.0.1:8000/v1", false, "127.0.0.1", "8000", "/v1"},
                                         {"https://api.example.test/v1/", true, "api.example.test", "443", "/v1"},
                                         {"http://h", false, "h", "80", ""}}) {
    auto u = ParseEndpointUrl(c.url);
    ASSERT_TRUE(u.ok()) << c.url << ": " << u.status();
    EXPECT_EQ(u->tls, c.tls) << c.url;
    EXPECT_EQ(u->host, c.host) << c.url;
    EXPECT_EQ(u->port, c.port) << c.url;
    EXPECT_EQ(u->path, c.path) << c.url;
  }
  EXPECT_EQ(ParseEndpointUrl("ftp://x").status().message(),
            "endpoint 'ftp://x': expected http://HOST[:PORT][/PATH], https://... or anthropic+http(s)://...");
  EXPECT_EQ(ParseEndpointUrl("http://h:8x/v1").status().message(), "endpoint 'http://h:8x/v1': bad port '8x'");
  EXPECT_EQ(ParseEndpointUrl("http:///v1").status().message(), "endpoint 'http:///v1': no host");
  EXPECT_TRUE(IsEndpointUrl("https://x"));
  EXPECT_FALSE(IsEndpointUrl("models/qwen"));
  EXPECT_TRUE(IsEndpointUrl("anthropic+https://x/v1"));
  EXPECT_FALSE(IsEndpointUrl("anthropic+ftp://x"));
  auto a = ParseEndpointUrl("anthropic+https://api.example.test/v1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->anthropic);
  EXPECT_TRUE(a->tls);
  EXPECT_EQ(a->host, "api.example.test");
  EXPECT_EQ(a->port, "443");
  EXPECT_EQ(a->path, "/v1");
  EXPECT_FALSE(ParseEndpointUrl("http://h/v1")->anthropic);
}

TEST(RemoteChatTest, RequestBodyCarriesMessagesToolsAndSampling) {
  std::vector<ChatMessage> m(3);
  m[0].role = ChatMessage::Role::kSystem;
  m[0].content = "sys";
  m[1].role = ChatMessage::Role::kAssistant;
  m[1].tool_calls.push_back({.id = "c1", .name = "bash", .arguments_json = "{\"command\":\"ls\"}"});
  m[2].role = ChatMessage::Role::kTool;
  m[2].tool_call_id = "c1";
  m[2].content = "a.txt";
  ChatRequest p;
  p.max_tokens = 7;
  p.temperature = 0.5f;
  p.seed = 3;
  std::vector<ToolSpec> tools = {{.name = "bash", .description = "run", .parameters_json = "{\"type\":\"object\"}"}};
  json body = RemoteChatRequestBody("m1", m, tools, p);
  EXPECT_EQ(body, json::parse(R"({"model":"m1","max_tokens":7,"temperature":0.5,"top_p":1.0,"stream":false,"seed":3,
    "messages":[{"role":"system","content":"sys"},
                {"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function",
                  "function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},
                {"role":"tool","content":"a.txt","tool_call_id":"c1"}],
    "tools":[{"type":"function","function":{"name":"bash","description":"run","parameters":{"type":"object"}}}]})"));
}

TEST(RemoteChatTest, ParsesRepliesAndNamesTheBadField) {
  auto r = ParseRemoteChatReply(R"({"choices":[{"message":{"content":null,"tool_calls":[{"id":"x",
      "function":{"name":"submit","arguments":"{}"}}]},"finish_reason":"tool_calls"}],
      "usage":{"prompt_tokens":12,"completion_tokens":3}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "");
  ASSERT_EQ(r->tool_calls.size(), 1u);
  EXPECT_EQ(r->tool_calls[0].name, "submit");
  EXPECT_EQ(r->tool_calls[0].id, "x");
  EXPECT_EQ(r->finish_reason, "tool_calls");
  EXPECT_EQ(r->prompt_tokens, 12);
  EXPECT_EQ(r->completion_tokens, 3);
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {"[1]", "reply: not a JSON object"},
           {R"({"choices":[]})", "reply: choices: missing or empty"},
           {R"({"choices":[{}]})", "reply: choices[0].message: missing"},
           {R"({"choices":[{"message":{"content":5}}]})", "reply: choices[0].message.content: expected a string or null"},
           {R"({"choices":[{"message":{"tool_calls":[{"function":{}}]}}]})",
            "reply: choices[0].message.tool_calls[0].function.name: missing"}}) {
    auto bad = ParseRemoteChatReply(body);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_EQ(bad.status().message(), message) << body;
  }
}

TEST(RemoteChatTest, MessagesBodyMergesTurnsAndCarriesToolsAsBlocks) {
  std::vector<ChatMessage> m(5);
  m[0].role = ChatMessage::Role::kSystem;
  m[0].content = "sys";
  m[1].role = ChatMessage::Role::kUser;
  m[1].content = "list";
  m[2].role = ChatMessage::Role::kAssistant;
  m[2].content = "ok";
  m[2].tool_calls.push_back({.id = "c1", .name = "bash", .arguments_json = "{\"command\":\"ls\"}"});
  m[3].role = ChatMessage::Role::kTool;
  m[3].tool_call_id = "c1";
  m[3].content = "a.txt";
  m[4].role = ChatMessage::Role::kUser;
  m[4].content = "go on";
  ChatRequest p;
  p.max_tokens = 7;
  p.temperature = 0.5f;
  std::vector<ToolSpec> tools = {{.name = "bash", .description = "run", .parameters_json = "{\"type\":\"object\"}"}};
  json body = RemoteMessagesRequestBody("m1", m, tools, p);
  EXPECT_EQ(body, json::parse(R"({"model":"m1","max_tokens":7,"temperature":0.5,"top_p":1.0,"stream":false,
    "system":"sys",
    "messages":[{"role":"user","content":[{"type":"text","text":"list"}]},
                {"role":"assistant","content":[{"type":"text","text":"ok"},
                  {"type":"tool_use","id":"c1","name":"bash","input":{"command":"ls"}}]},
                {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"a.txt"},
                  {"type":"text","text":"go on"}]}],
    "tools":[{"name":"bash","description":"run","input_schema":{"type":"object"}}]})"));
}

TEST(RemoteChatTest, ParsesMessagesRepliesAndNamesTheBadField) {
  auto r = ParseRemoteMessagesReply(R"({"content":[{"type":"text","text":"let me look"},
      {"type":"tool_use","id":"t1","name":"bash","input":{"command":"ls"}}],"stop_reason":"tool_use",
      "usage":{"input_tokens":21,"output_tokens":5}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "let me look");
  ASSERT_EQ(r->tool_calls.size(), 1u);
  EXPECT_EQ(r->tool_calls[0].id, "t1");
  EXPECT_EQ(r->tool_calls[0].name, "bash");
  EXPECT_EQ(r->tool_calls[0].arguments_json, "{\"command\":\"ls\"}");
  EXPECT_EQ(r->finish_reason, "tool_calls");
  EXPECT_EQ(r->prompt_tokens, 21);
  EXPECT_EQ(r->completion_tokens, 5);
  for (const auto& [stop, finish] : std::vector<std::pair<std::string, std::string>>{
           {"end_turn", "stop"}, {"stop_sequence", "stop"}, {"max_tokens", "length"}}) {
    auto s = ParseRemoteMessagesReply(R"({"content":[],"stop_reason":")" + stop + "\"}");
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->finish_reason, finish) << stop;
  }
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {"[1]", "reply: not a JSON object"},
           {R"({"type":"message"})", "reply: content: missing"},
           {R"({"content":[{}]})", "reply: content[0].type: missing"},
           {R"({"content":[{"type":"text"}]})", "reply: content[0].text: missing"},
           {R"({"content":[{"type":"text","text":""},{"type":"tool_use"}]})", "reply: content[1].name: missing"}}) {
    auto bad = ParseRemoteMessagesReply(body);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_EQ(bad.status().message(), message) << body;
  }
}

// Two turns through a proxy worker whose model is Flotilla's own worker HTTP at `scheme`HOST/v1.
void ProxyTwoTurns(const std::string& scheme) {
  testing::TempDir dir;
  app::EmbeddedWorkerOptions up;
  up.state_dir = dir.file("upstream");
  up.http_address = "127.0.0.1:0";
  up.engine.threads = 1;
  auto upstream = app::EmbeddedWorker::Start(up);
  ASSERT_TRUE(upstream.ok()) << upstream.status();

  app::EmbeddedWorkerOptions o;
  o.state_dir = dir.file("proxy");
  o.model_prefix = scheme + (*upstream)->http_address() + "/v1";
  auto proxy = app::EmbeddedWorker::Start(o);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  ChatService& service = (*proxy)->service();
  EXPECT_EQ(service.ModelName(), "flotilla-default");  // the endpoint's first listed model

  ChatRequest req;
  req.system = "be brief";
  req.max_tokens = 8;
  req.seed = 1;
  ChatMessage user;
  user.content = "hello";
  req.messages = {user};
  auto first = service.Complete(req, nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  ChatMessage said;
  said.role = ChatMessage::Role::kAssistant;
  said.content = first->text;
  ChatMessage again;
  again.content = "and?";
  req.messages = {user, said, again};
  auto second = service.Complete(req, nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->session_id, first->session_id);  // the conversation extends the session

  auto t = service.CloseSession(first->session_id, v1::OK, 1.0, "");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->segments_size(), 1);
  const v1::Segment& seg = t->segments(0);
  ASSERT_EQ(seg.turns_size(), 5);  // system, user, reply, user, reply
  EXPECT_EQ(seg.turns(0).text(), "be brief");
  EXPECT_EQ(seg.turns(2).role(), v1::Turn::ASSISTANT);
  EXPECT_EQ(seg.turns(2).text(), first->text);
  EXPECT_EQ(seg.turns(4).text(), second->text);
  for (const v1::Turn& turn : seg.turns()) EXPECT_EQ(turn.tokens().ids_size(), 0);
  // The usage the endpoint reported, summed over both calls.
  EXPECT_EQ(t->metrics().at(kUsagePromptTokens), first->prompt_tokens + second->prompt_tokens);
  EXPECT_EQ(t->metrics().at(kUsageCompletionTokens), first->completion_tokens + second->completion_tokens);
  EXPECT_GT(first->prompt_tokens, 0u);
  EXPECT_GT(first->completion_tokens, 0u);
  // The endpoint itself kept its own token-exact record of the same replies.
  auto upstream_count = (*upstream)->store().Count({});
  ASSERT_TRUE(upstream_count.ok());
  EXPECT_GE(*upstream_count, 1);
  if (scheme != "http://") return;

  // An endpoint that is not there is an error naming the flag.
  app::EmbeddedWorkerOptions gone = o;
  gone.state_dir = dir.file("gone");
  gone.model_prefix = "http://127.0.0.1:1/v1";
  auto failed = app::EmbeddedWorker::Start(gone);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(std::string(failed.status().message()).rfind("-m http://127.0.0.1:1/v1: http://127.0.0.1:1/v1/models: connecting to 127.0.0.1:1: ", 0), 0u)
      << failed.status();
}

TEST(RemoteChatTest, ProxiedEndpointIsRecordedAsTextWithItsUsage) { ProxyTwoTurns("http://"); }

// The same endpoint over its Anthropic Messages API (x-api-key, /v1/messages).
TEST(RemoteChatTest, ProxiedAnthropicEndpointIsRecordedAsTextWithItsUsage) { ProxyTwoTurns("anthropic+http://"); }

}  // namespace
}  // namespace flotilla::worker
