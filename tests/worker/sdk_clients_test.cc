// The official OpenAI and Anthropic npm clients against a worker over the real CPU engine:
// every wire API, streaming and not, tool calls in the history, and a 20-turn session per
// API; then the stored trajectories are checked token by token against the engine.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_harness.h"
#include "nlohmann/json.hpp"
#include "testing/shell.h"
#include "trajectory_check.h"

namespace flotilla::worker {
namespace {

using nlohmann::json;

std::string SourceDir() {
  const char* s = std::getenv("FLOTILLA_SOURCE_DIR");
  return s == nullptr ? "." : s;
}

// Runs the client script; returns its stdout, or fails the test.
std::string RunClients(const std::string& base) {
  const std::string npm = SourceDir() + "/var/npm";
  if (!std::filesystem::exists(npm + "/node_modules/openai/package.json")) {
    ADD_FAILURE() << "npm clients missing: run scripts/test-deps.d/worker-npm.sh";
    return "";
  }
  std::string cmd = "FLOTILLA_BASE='" + base + "' FLOTILLA_NPM_DIR='" + npm + "' node '" +
                    SourceDir() + "/tests/worker/js/sdk_clients.cjs'";
  int rc = 0;
  std::string out = flotilla::testing::RunShell(cmd, &rc);
  EXPECT_EQ(rc, 0) << out;
  return out;
}

class SdkClientsTest : public ::testing::Test {
 protected:
  flotilla::testing::TempDir dir_;
  testing::EngineHarness h_;
};

TEST_F(SdkClientsTest, AllThreeApisRecordExactTrajectories) {
  h_.Start(dir_);
  const std::string out = RunClients(h_.base_url());
  ASSERT_FALSE(out.empty());
  json wire = json::parse(out);
  const int width = h_.config().routing_width();

  const std::vector<std::string> sessions = {"oa-chat", "oa-chat-stream", "oa-resp", "oa-resp-stream",
                                             "an-msg", "an-msg-stream", "oa-chat-20", "oa-resp-20",
                                             "an-msg-20"};
  for (const std::string& id : sessions) {
    SCOPED_TRACE(id);
    auto t = h_.store().Get(id);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->experiment(), "exp-test");
    ASSERT_EQ(t->segments_size(), 1) << "a history rewrite was detected where there was none";
    EXPECT_EQ(t->segments(0).reason(), "start");
    size_t generated = testing::ExpectSegmentIsOneEngineSequence(t->segments(0), h_.recorder(), h_.engine(), width);
    EXPECT_GT(generated, 0u);
  }

  // 20 turns each: 21 user turns and 20 model turns in one segment.
  for (const char* id : {"oa-chat-20", "oa-resp-20", "an-msg-20"}) {
    auto t = h_.store().Get(id);
    ASSERT_TRUE(t.ok());
    int assistant = 0, user = 0;
    for (const auto& turn : t->segments(0).turns()) {
      assistant += turn.role() == v1::Turn::ASSISTANT;
      user += turn.role() == v1::Turn::USER;
    }
    EXPECT_EQ(assistant, 20) << id;
    EXPECT_EQ(user, 20) << id;  // the last "turn 20" was never sent
  }

  // What the clients saw equals the record: logprobs on the wire, streamed text.
  auto chat = h_.store().Get("oa-chat");
  ASSERT_TRUE(chat.ok());
  const auto& last = *chat->segments(0).turns().rbegin();
  std::vector<float> recorded;
  for (int i = 0; i < last.tokens().ids_size(); ++i) {
    if (last.tokens().loss_mask(i) == 1) recorded.push_back(last.tokens().logprobs(i));
  }
  if (!recorded.empty() && last.tokens().ids(last.tokens().ids_size() - 1) == inference::kEndTurn &&
      last.tokens().loss_mask(last.tokens().ids_size() - 1) == 1) {
    recorded.pop_back();
  }
  std::vector<float> on_wire;
  for (const auto& x : wire["oa-chat"]["logprobs"]) on_wire.push_back(x.get<float>());
  EXPECT_EQ(on_wire, recorded);
  EXPECT_EQ(wire["oa-chat"]["text"], last.text());
  auto streamed = h_.store().Get("oa-chat-stream");
  EXPECT_EQ(wire["oa-chat-stream"]["text"], streamed->segments(0).turns().rbegin()->text());
  EXPECT_FALSE(wire["oa-chat-stream"]["finish"].is_null());
  EXPECT_EQ(wire["oa-resp-stream"]["first"], "response.created");
  EXPECT_EQ(wire["oa-resp-stream"]["text"], wire["oa-resp-stream"]["final_text"]);
  auto resp_stream = h_.store().Get("oa-resp-stream");
  EXPECT_EQ(wire["oa-resp-stream"]["text"], resp_stream->segments(0).turns().rbegin()->text());
  const json& events = wire["an-msg-stream"]["events"];
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front(), "message_start");
  EXPECT_EQ(events.back(), "message_stop");
  auto an = h_.store().Get("an-msg-stream");
  EXPECT_EQ(wire["an-msg-stream"]["text"], an->segments(0).turns().rbegin()->text());
  EXPECT_GT(wire["an-count"].get<int>(), 100);
  // The tool call in the history is recorded as the client sent it (not model-generated).
  const auto& hist = chat->segments(0).turns(2);
  EXPECT_EQ(hist.role(), v1::Turn::ASSISTANT);
  ASSERT_EQ(hist.tool_calls_size(), 1);
  EXPECT_EQ(hist.tool_calls(0).id(), "call_hist1");
  for (uint32_t m : hist.tokens().loss_mask()) EXPECT_EQ(m, 0u);
  EXPECT_EQ(chat->segments(0).turns(3).tool_call_id(), "call_hist1");
}

}  // namespace
}  // namespace flotilla::worker
