// A prompt-only task as a sandbox task (SandboxTaskOf), its test script run in a real
// no-network sandbox behind the NodeAgent API: it recomputes the truth from the prompt,
// compares the reply the single-turn scaffold wrote literally, and writes the reward file.
#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "flotilla/app/embedded_node.h"
#include "flotilla/trainer_bridge/task_source.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/scaffold.h"
#include "flotilla/worker/terminal_task.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

class SandboxTaskTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new flotilla::testing::TempDir();
    auto node = app::EmbeddedNode::Start(dir_->file("state"), "flotilla-sandbox-task-test-" + std::to_string(::getpid()));
    if (node.ok()) {
      node_ = node->release();
      sandboxes_ = new worker::SandboxClient(node_->channel());
    } else {
      open_error_ = new std::string(node.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete sandboxes_;
    sandboxes_ = nullptr;
    delete node_;
    node_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (node_ == nullptr) GTEST_SKIP() << "sandbox runtime unavailable: " << *open_error_;
    v1::CreateRequest req;
    req.set_policy_name("no-network");
    auto id = sandboxes_->Create(req);
    ASSERT_TRUE(id.ok()) << id.status();
    sandbox_ = *id;
  }
  void TearDown() override {
    if (!sandbox_.empty()) (void)sandboxes_->Destroy(sandbox_);
  }

  // Writes `reply` where the single-turn scaffold does, runs the task's tests as the scaffold
  // does, and returns the reward file's text.
  std::string Judge(const Task& task, const std::string& reply) {
    const worker::TerminalTask t = SandboxTaskOf(task);
    v1::ExecRequest clean;
    clean.set_sandbox_id(sandbox_);
    for (const char* a : {"rm", "-rf", "/logs", "/tests"}) clean.add_argv(a);
    clean.set_timeout_ms(10'000);
    EXPECT_TRUE(sandboxes_->Exec(clean).ok());
    EXPECT_TRUE(sandboxes_->PutFile(sandbox_, worker::kSingleTurnResponsePath, reply, 0644).ok());
    for (const auto& [path, content] : t.test_files) EXPECT_TRUE(sandboxes_->PutFile(sandbox_, path, content, 0755).ok());
    v1::ExecRequest run;
    run.set_sandbox_id(sandbox_);
    for (const std::string& a : t.test_command) run.add_argv(a);
    run.set_timeout_ms(t.test_timeout_ms);
    auto out = sandboxes_->Exec(run);
    EXPECT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->exit_code, 0) << out->output;
    auto reward = sandboxes_->GetFile(sandbox_, t.reward_file, 64);
    return reward.ok() ? *reward : std::string(reward.status().message());
  }

  static flotilla::testing::TempDir* dir_;
  static app::EmbeddedNode* node_;
  static worker::SandboxClient* sandboxes_;
  static std::string* open_error_;
  std::string sandbox_;
};

flotilla::testing::TempDir* SandboxTaskTest::dir_ = nullptr;
app::EmbeddedNode* SandboxTaskTest::node_ = nullptr;
worker::SandboxClient* SandboxTaskTest::sandboxes_ = nullptr;
std::string* SandboxTaskTest::open_error_ = nullptr;

struct Case {
  std::string family, prompt, reference, reply;
  std::string reward;
};

TEST_F(SandboxTaskTest, JudgesEveryFamilyByItsOwnTruth) {
  const std::vector<Case> cases = {
      {"arith", "2+3=", "5", "5", "1\n"},
      {"arith", "2+3=", "5", "  5 ", "1\n"},         // surrounding blanks are trimmed
      {"arith", "2+3=", "6", "5", "1\n"},            // the truth is recomputed, not the reference
      {"arith", "2+3=", "5", "6", "0\n"},
      {"arith", "12*3-4=", "32", "32", "1\n"},
      {"arith", "2+3=", "5", "5\n", "1\n"},          // a newline becomes a trimmed blank
      {"arith", "2+3=", "5", "5\nand more", "0\n"},  // a second line is part of the reply
      {"arith", "2+3=", "5", "$((2+3))", "0\n"},     // compared literally, never evaluated
      {"arith", "$(echo 5)=", "5", "5", "0\n"},      // not an arithmetic prompt
      {"arith", "1+=", "", "1", "0\n"},              // a malformed expression is a wrong answer
      {"arith", "08=", "", "8", "0\n"},
      {"copy", "copy hello world", "", "hello world", "1\n"},
      {"copy", "copy hello world", "", "hello", "0\n"},
      {"copy", "copy a\tb", "", "a b", "1\n"},       // a tab in the prompt becomes a blank
      {"copy", "copy it's", "", "it's", "1\n"},      // quotes reach the script intact
      {"file", "what is in answer.txt?", "42", "42", "1\n"},
      {"file", "what is in answer.txt?", "42", "41", "0\n"},
      {"poem", "write a poem", "", "roses", "0\n"},  // an unknown family earns nothing
  };
  for (const Case& c : cases) {
    Task task{"t", c.family, c.prompt, c.reference, {}};
    EXPECT_EQ(Judge(task, c.reply), c.reward) << c.family << " '" << c.prompt << "' -> '" << c.reply << "'";
  }
}

TEST_F(SandboxTaskTest, ATaskWithASandboxTaskKeepsIt) {
  Task task{"hello", "terminal", "say hello", "", {}};
  task.terminal.name = "hello-file";
  task.terminal.test_command = {"bash", "/tests/test.sh"};
  const worker::TerminalTask t = SandboxTaskOf(task);
  EXPECT_EQ(t.name, "hello-file");
  EXPECT_EQ(t.test_command, (std::vector<std::string>{"bash", "/tests/test.sh"}));
}

TEST_F(SandboxTaskTest, APromptTaskIsASmallSandbox) {
  const worker::TerminalTask t = SandboxTaskOf(Task{"arith:1+1=", "arith", "1+1=", "2", {}});
  EXPECT_EQ(t.name, "arith:1+1=");
  EXPECT_EQ(t.instruction, "1+1=");
  EXPECT_EQ(t.memory_bytes, 64ull << 20);
  EXPECT_EQ(t.reward_file, "/logs/verifier/reward.txt");
  EXPECT_EQ(t.test_files.size(), 1u);
  EXPECT_EQ(t.test_command, (std::vector<std::string>{"/bin/sh", "/tests/test.sh"}));
}

}  // namespace
}  // namespace flotilla::trainer_bridge
