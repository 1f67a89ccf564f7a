// The worker's Prometheus figures: real requests over loopback through the wire API and a
// ChatService sharing one registry, then the rendered exposition read value by value.
#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_split.h"
#include "flotilla/worker/wire_api.h"
#include "nlohmann/json.hpp"
#include "scripted_generator.h"
#include "testing/http_client.h"

namespace flotilla::worker {
namespace {

using flotilla::testing::HttpCall;
using nlohmann::json;

std::map<std::string, std::string> Samples(const std::string& body) {
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    if (line.front() == '#') continue;
    size_t sp = line.rfind(' ');
    out[std::string(line.substr(0, sp))] = std::string(line.substr(sp + 1));
  }
  return out;
}

class WorkerMetricsTest : public ::testing::Test {
 protected:
  WorkerMetricsTest() : service_(&gen_, Options(&registry_)), api_(&service_) {
    auto s = ServeWireApi("127.0.0.1:0", &api_, &registry_);
    EXPECT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  static ChatServiceOptions Options(MetricsRegistry* registry) {
    ChatServiceOptions o;
    o.experts_per_token = testing::ScriptedGenerator::kWidth;
    o.metrics = registry;
    return o;
  }
  MetricsRegistry registry_;
  testing::ScriptedGenerator gen_;
  ChatService service_;
  WireApi api_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(WorkerMetricsTest, CountsSessionsTurnsTokensToolCallsAndRequestsByRouteAndStatus) {
  std::vector<int32_t> call = inference::Encode("ok");
  call.push_back(inference::kToolCallBegin);
  for (int32_t x : inference::Encode(R"({"name": "bash", "arguments": {"cmd": "ls"}})")) call.push_back(x);
  call.push_back(inference::kToolCallEnd);
  call.push_back(inference::kEndTurn);
  gen_.AddReply(call);
  json req = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}},
              {"tools", {{{"type", "function"}, {"function", {{"name", "bash"}, {"parameters", {{"type", "object"}}}}}}}}};
  auto r = HttpCall(server_->port(), "POST", "/v1/chat/completions", req.dump(), {{"x-flotilla-session", "s1"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json usage = json::parse(r.body)["usage"];
  EXPECT_EQ(HttpCall(server_->port(), "POST", "/v1/chat/completions", "{not json").status, 400);
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/v1/nowhere").status, 404);
  EXPECT_EQ(HttpCall(server_->port(), "GET", "/health").status, 200);

  auto m = Samples(registry_.RenderPrometheus());
  EXPECT_EQ(m["flotilla_worker_sessions_opened_total"], "1");
  EXPECT_EQ(m["flotilla_worker_sessions_live"], "1");
  EXPECT_EQ(m["flotilla_worker_turns_total"], "1");
  EXPECT_EQ(m["flotilla_worker_tool_calls_total"], "1");
  EXPECT_EQ(m["flotilla_worker_tokens_total{kind=\"prompt\"}"], std::to_string(usage["prompt_tokens"].get<int>()));
  EXPECT_EQ(m["flotilla_worker_tokens_total{kind=\"completion\"}"],
            std::to_string(usage["completion_tokens"].get<int>()));
  EXPECT_EQ(m["flotilla_worker_tokens_total{kind=\"completion\"}"], std::to_string(call.size()));
  EXPECT_EQ(m["flotilla_worker_tokens_total{kind=\"prompt_reused\"}"], "0");
  EXPECT_EQ(m["flotilla_worker_turn_seconds_count"], "1");
  EXPECT_EQ(m["flotilla_worker_requests_total{route=\"/chat/completions\",status=\"200\"}"], "1");
  EXPECT_EQ(m["flotilla_worker_requests_total{route=\"/chat/completions\",status=\"400\"}"], "1");
  EXPECT_EQ(m["flotilla_worker_requests_total{route=\"other\",status=\"404\"}"], "1");
  EXPECT_EQ(m["flotilla_worker_requests_total{route=\"/health\",status=\"200\"}"], "1");
  EXPECT_EQ(m["flotilla_worker_request_seconds_count{route=\"/chat/completions\"}"], "2");

  EXPECT_EQ(RouteLabel("/s/abc/v1/messages/"), "/messages");
  EXPECT_EQ(RouteLabel("/api/trajectories/exp%2Fs1"), "/api/trajectories");
  EXPECT_EQ(RouteLabel("/dashboard/app.js"), "/dashboard");
  EXPECT_EQ(RouteLabel("/etc/passwd"), "other");

  ASSERT_TRUE(service_.CloseSession("s1", v1::OK, 1.0, "done").ok());
  m = Samples(registry_.RenderPrometheus());
  EXPECT_EQ(m["flotilla_worker_sessions_live"], "0");
  EXPECT_EQ(m["flotilla_worker_sessions_closed_total{status=\"OK\"}"], "1");
}

}  // namespace
}  // namespace flotilla::worker
