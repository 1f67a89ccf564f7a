// A real agent CLI from the npm registry (the Pi coding agent) runs inside a sandbox with the
// default no-network policy, reaching the worker only through the in-sandbox endpoint. With a
// random model its actions are nonsense; the test checks the protocol worked end to end and
// that the run's trajectory was stored, token-exact.
#include "flotilla/worker/external_agent.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "engine_harness.h"
#include "flotilla/app/embedded_node.h"
#include "trajectory_check.h"

namespace flotilla::worker {
namespace {

using app::EmbeddedNode;

TEST(AgentCliTest, PiCodingAgentRunsInASandboxAgainstTheWorker) {
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  const std::string pi = std::string(src == nullptr ? "." : src) + "/var/agents/pi";
  ASSERT_TRUE(std::filesystem::exists(pi + "/node_modules/@mariozechner/pi-coding-agent/dist/cli.js"))
      << "Pi missing: run scripts/test-deps.d/worker-npm.sh";
  flotilla::testing::TempDir dir;
  auto node = EmbeddedNode::Start(dir.file("sandboxes"), "flotilla-wagent-" + std::to_string(::getpid()));
  if (!node.ok()) GTEST_SKIP() << "sandboxes unavailable here: " << node.status();
  SandboxClient client((*node)->channel());
  testing::EngineHarness h;
  h.Start(dir);
  const int port = std::stoi(h.base_url().substr(h.base_url().rfind(':') + 1));
  auto run = RunExternalAgent(h.service(), client, port, PiAgentSpec(pi, 8192, 24), "say hi", 180'000);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output;
  EXPECT_GE(run->connections, 1);
  auto t = h.store().Get(run->session_id);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->scaffold(), "pi");
  EXPECT_EQ(t->status(), v1::OK);
  EXPECT_EQ(t->sandbox_id(), run->sandbox_id);
  ASSERT_GE(t->segments_size(), 1);
  // Pi's own system prompt, tool definitions and the prompt reached the model.
  const auto& first = t->segments(0).turns(0);
  EXPECT_EQ(first.role(), v1::Turn::SYSTEM);
  EXPECT_THAT(first.text(), ::testing::HasSubstr("# Tools"));
  bool asked = false;
  for (const auto& turn : t->segments(0).turns()) asked = asked || turn.text() == "say hi";
  EXPECT_TRUE(asked);
  for (const auto& seg : t->segments()) {
    EXPECT_GT(testing::ExpectSegmentIsOneEngineSequence(seg, h.recorder(), h.engine(), h.config().routing_width()), 0u);
  }
}

}  // namespace
}  // namespace flotilla::worker
