// The built-in scaffolds on the sample tasks, in real sandboxes reached through the NodeAgent
// gRPC API (in-process channel): reference solutions pass and doing nothing fails, in both
// Terminal-Bench layouts; the mini loop runs a solution end to end; and both scaffolds run the
// real engine's random model, whose trajectory is checked token by token.
#include "flotilla/worker/scaffold.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine_harness.h"
#include "flotilla/app/embedded_node.h"
#include "scripted_generator.h"
#include "trajectory_check.h"

namespace flotilla::worker {
namespace {

using app::EmbeddedNode;

std::string TaskDir(const std::string& name) {
  const char* s = std::getenv("FLOTILLA_SOURCE_DIR");
  return std::string(s == nullptr ? "." : s) + "/examples/tasks/" + name;
}

class ScaffoldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto node = EmbeddedNode::Start(dir_.file("sandboxes"), "flotilla-wtest-" + std::to_string(::getpid()));
    if (!node.ok()) GTEST_SKIP() << "sandboxes unavailable here: " << node.status();
    node_ = std::move(*node);
    client_ = std::make_unique<SandboxClient>(node_->channel());
  }
  absl::StatusOr<ScaffoldResult> Run(ChatService& service, const std::string& task_name,
                                     ScaffoldOptions o) {
    auto task = LoadTerminalTask(TaskDir(task_name));
    if (!task.ok()) return task.status();
    o.policy_name = "no-network";
    return RunScaffold(service, *client_, *task, o);
  }
  flotilla::testing::TempDir dir_;
  std::unique_ptr<EmbeddedNode> node_;
  std::unique_ptr<SandboxClient> client_;
};

TEST_F(ScaffoldTest, ReferencePassesAndNothingFailsInBothLayouts) {
  testing::ScriptedGenerator gen;
  auto store = TrajectoryStore::Open(dir_.file("t.db"));
  ASSERT_TRUE(store.ok());
  ChatServiceOptions so;
  so.store = store->get();
  ChatService service(&gen, so);
  for (const char* task : {"hello-file", "sum-numbers", "count-lines-tb1"}) {
    for (const char* agent : {"reference", "none"}) {
      SCOPED_TRACE(std::string(task) + " / " + agent);
      ScaffoldOptions o;
      o.scaffold = "terminal";
      o.agent = agent;
      auto r = Run(service, task, o);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->status, v1::OK) << r->detail;
      EXPECT_EQ(r->reward, std::string(agent) == "reference" ? 1.0 : 0.0) << r->detail;
      auto t = (*store)->Get(r->trajectory_id);
      ASSERT_TRUE(t.ok());
      EXPECT_EQ(t->task(), task);
      EXPECT_EQ(t->reward(), r->reward);
      EXPECT_EQ(t->sandbox_id(), r->sandbox_id);
    }
  }
  EXPECT_TRUE(gen.calls().empty());
}

TEST_F(ScaffoldTest, MiniLoopRunsCommandsUntilSubmit) {
  // The model seam scripted to act like a competent agent; the commands run for real.
  testing::ScriptedGenerator gen;
  gen.AddTextReply("THOUGHT: look first.\n\n```bash\nls /app && cat /app/numbers.txt | head -2\n```");
  gen.AddTextReply("THOUGHT: two blocks is a format error.\n```bash\nls\n```\n```bash\nls\n```");
  gen.AddTextReply("THOUGHT: sum.\n\n```bash\nawk '{ s += $1 } END { print s }' /app/numbers.txt > /app/sum.txt\n```");
  gen.AddTextReply("Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat /app/sum.txt\n```");
  ChatService service(&gen, ChatServiceOptions());
  ScaffoldOptions o;
  o.scaffold = "mini";
  o.seed = 1;
  auto r = Run(service, "sum-numbers", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->reward, 1.0) << r->detail;
  EXPECT_EQ(r->steps, 4);
  EXPECT_THAT(r->detail, ::testing::HasSubstr("submitted"));
  auto calls = gen.calls();
  ASSERT_EQ(calls.size(), 4u);
  // Turn 2 saw the output of turn 1 as its observation, appended to the one kept sequence.
  std::string fed = inference::Decode(calls[1].new_tokens, true);
  EXPECT_THAT(fed, ::testing::HasSubstr("<returncode>0</returncode>"));
  EXPECT_THAT(fed, ::testing::HasSubstr("numbers.txt\n17\n-4\n"));
  EXPECT_EQ(calls[1].sequence_id, "seq-0");
  EXPECT_THAT(inference::Decode(calls[2].new_tokens, true), ::testing::HasSubstr("EXACTLY ONE action"));
}

TEST_F(ScaffoldTest, BothScaffoldsDriveTheRealEngine) {
  testing::EngineHarness h;
  h.Start(dir_);
  for (const char* scaffold : {"mini", "terminal"}) {
    SCOPED_TRACE(scaffold);
    ScaffoldOptions o;
    o.scaffold = scaffold;
    o.max_steps = 3;
    o.max_tokens = 48;
    o.seed = 9;
    auto r = Run(h.service(), scaffold == std::string("mini") ? "count-lines-tb1" : "hello-file", o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, v1::OK) << r->detail;
    EXPECT_EQ(r->reward, 0.0);  // a random model does not solve tasks
    auto t = h.store().Get(r->trajectory_id);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->scaffold(), scaffold);
    ASSERT_EQ(t->segments_size(), 1);
    int assistant = 0;
    for (const auto& turn : t->segments(0).turns()) assistant += turn.role() == v1::Turn::ASSISTANT;
    EXPECT_EQ(assistant, r->steps);
    EXPECT_GT(testing::ExpectSegmentIsOneEngineSequence(t->segments(0), h.recorder(), h.engine(),
                                                        h.config().routing_width()),
              0u);
  }
}

TEST(TerminalTaskTest, LoadsBothLayoutsAndNamesBadFields) {
  auto v2 = LoadTerminalTask(TaskDir("hello-file"));
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->layout, TerminalTask::Layout::kTerminalBench2);
  EXPECT_EQ(v2->agent_timeout_ms, 120000u);
  EXPECT_EQ(v2->test_timeout_ms, 30000u);
  EXPECT_EQ(v2->reward_file, "/logs/verifier/reward.txt");
  EXPECT_TRUE(v2->test_files.count("/tests/test.sh"));
  EXPECT_FALSE(v2->environment_files.count("/app/Dockerfile"));
  auto v1t = LoadTerminalTask(TaskDir("count-lines-tb1"));
  ASSERT_TRUE(v1t.ok()) << v1t.status();
  EXPECT_EQ(v1t->layout, TerminalTask::Layout::kTerminalBench1);
  EXPECT_TRUE(v1t->environment_files.count("/app/data.txt"));
  EXPECT_TRUE(v1t->test_files.count("/tests/run-tests.sh"));
  EXPECT_TRUE(v1t->test_files.count("/tests/check.sh"));
  EXPECT_FALSE(v1t->environment_files.count("/app/solution.sh"));

  flotilla::testing::TempDir d;
  std::ofstream(d.file("task.toml")) << "[agent]\ntimeout_sec = -3\n";
  std::ofstream(d.file("instruction.md")) << "x";
  auto bad = LoadTerminalTask(d.path().string());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("agent.timeout_sec"));
  EXPECT_EQ(LoadTerminalTask(d.file("nope")).status().code(), absl::StatusCode::kNotFound);
}

TEST(MiniActionTest, ExactlyOneBashBlock) {
  EXPECT_TRUE(ParseMiniAction("t\n```bash\nls -la\n```").ok);
  EXPECT_EQ(ParseMiniAction("t\n```bash\nls -la\n```").command, "ls -la");
  EXPECT_FALSE(ParseMiniAction("no block").ok);
  EXPECT_THAT(ParseMiniAction("```bash\na\n```\n```bash\nb\n```").error, ::testing::HasSubstr("found 2 actions"));
}

}  // namespace
}  // namespace flotilla::worker
