// builtin:lookup tasks in real sandboxes (NodeAgent API, in-process channel), through the worker's
// scaffolds: the reference solution earns 1 and doing nothing 0 under both mini and terminal; a
// model that replays the reference conversation (the warm-start examples) earns 1 and its stored
// trajectory is exactly the rendered reference tokens and mask; a wrong number earns 0.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "flotilla/app/embedded_node.h"
#include "flotilla/trainer_bridge/task_source.h"
#include "flotilla/worker/scaffold.h"
#include "flotilla/worker/scaffold_transcript.h"
#include "testing/temp_dir.h"
#include "worker/scripted_generator.h"
#include "worker/trajectory_check.h"

namespace flotilla::trainer_bridge {
namespace {

class LookupSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto node = app::EmbeddedNode::Start(dir_.file("sandboxes"), "flotilla-ltest-" + std::to_string(::getpid()));
    if (!node.ok()) GTEST_SKIP() << "sandboxes unavailable here: " << node.status();
    node_ = std::move(*node);
    client_ = std::make_unique<worker::SandboxClient>(node_->channel());
    auto store = worker::TrajectoryStore::Open(dir_.file("t.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::vector<Task> Tasks(const std::string& source, int n) {
    auto src = TaskSource::Open(source, 5);
    EXPECT_TRUE(src.ok()) << src.status();
    std::vector<Task> out;
    for (int i = 0; src.ok() && i < n; ++i) out.push_back((*src)->Next());
    return out;
  }
  absl::StatusOr<worker::ScaffoldResult> Run(worker::ChatService& service, const Task& task,
                                             const std::string& scaffold, const std::string& agent,
                                             const std::string& system_prompt = "") {
    worker::ScaffoldOptions o;
    o.scaffold = scaffold;
    o.agent = agent;
    o.system_prompt = system_prompt;
    o.policy_name = "no-network";
    o.max_steps = 4;
    return worker::RunScaffold(service, *client_, task.terminal, o);
  }
  flotilla::testing::TempDir dir_;
  std::unique_ptr<app::EmbeddedNode> node_;
  std::unique_ptr<worker::SandboxClient> client_;
  std::unique_ptr<worker::TrajectoryStore> store_;
};

TEST_F(LookupSandboxTest, ReferenceEarnsOneAndNothingEarnsZero) {
  worker::testing::ScriptedGenerator gen;
  worker::ChatServiceOptions so;
  so.store = store_.get();
  worker::ChatService service(&gen, so);
  std::vector<Task> tasks = Tasks("builtin:lookup?files=4&max=99", 2);
  for (Task& t : Tasks("builtin:lookup?files=2&max=999&add=9&split=heldout", 2)) tasks.push_back(t);
  for (const Task& task : tasks) {
    for (const char* scaffold : {"mini", "terminal"}) {
      for (const char* agent : {"reference", "none"}) {
        SCOPED_TRACE(task.id + " / " + scaffold + " / " + agent);
        auto r = Run(service, task, scaffold, agent);
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_EQ(r->status, v1::OK) << r->detail;
        EXPECT_EQ(r->reward, std::string(agent) == "reference" ? 1.0 : 0.0) << r->detail;
        auto stored = store_->Get(r->trajectory_id);
        ASSERT_TRUE(stored.ok()) << stored.status();
        EXPECT_EQ(stored->task(), task.id);
      }
    }
  }
  EXPECT_TRUE(gen.calls().empty());  // neither agent asks the model
}

TEST_F(LookupSandboxTest, ReplayedReferenceConversationEarnsOneTokenForToken) {
  std::vector<Task> tasks = Tasks("builtin:lookup?files=3&max=99&add=5", 2);
  // The scaffolds' own system texts, and with an experiment's system prompt before it.
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"mini", ""}, {"terminal", ""}, {"mini", "Read the file first."}};
  for (const Task& task : tasks) {
    for (const auto& [scaffold, system_prompt] : variants) {
      SCOPED_TRACE(task.id + " / " + scaffold + " / " + system_prompt);
      worker::ScaffoldOptions o;
      o.scaffold = scaffold;
      o.system_prompt = system_prompt;
      auto examples = worker::ReferenceTurnExamples(task.terminal, o);
      auto reference = worker::ReferenceTrajectoryTokens(task.terminal, o);
      ASSERT_TRUE(examples.ok() && reference.ok());
      worker::testing::ScriptedGenerator gen;
      for (const worker::TurnExample& ex : *examples) gen.AddReply(ex.target);
      worker::ChatServiceOptions so;
      so.store = store_.get();
      worker::ChatService service(&gen, so);
      auto r = Run(service, task, scaffold, "model", system_prompt);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->reward, 1.0) << r->detail;
      EXPECT_EQ(r->steps, 2);
      EXPECT_THAT(r->detail, ::testing::HasSubstr("submitted"));
      // Each turn the engine was fed exactly the example's prompt (the new part of it).
      auto calls = gen.calls();
      ASSERT_EQ(calls.size(), 2u);
      EXPECT_EQ(calls[0].new_tokens, (*examples)[0].prompt);
      std::vector<int32_t> fed = (*examples)[0].prompt;
      fed.insert(fed.end(), (*examples)[0].target.begin(), (*examples)[0].target.end());
      fed.insert(fed.end(), calls[1].new_tokens.begin(), calls[1].new_tokens.end());
      EXPECT_EQ(fed, (*examples)[1].prompt);
      auto stored = store_->Get(r->trajectory_id);
      ASSERT_TRUE(stored.ok()) << stored.status();
      ASSERT_EQ(stored->segments_size(), 1);
      worker::testing::FlatSegment flat = worker::testing::Flatten(stored->segments(0));
      EXPECT_EQ(flat.ids, reference->tokens);
      EXPECT_EQ(flat.mask, std::vector<uint32_t>(reference->generated.begin(), reference->generated.end()));
    }
  }
}

TEST_F(LookupSandboxTest, AWrongNumberEarnsZero) {
  Task task = Tasks("builtin:lookup?files=1&max=99", 1)[0];
  const std::string wrong = std::to_string(std::stoi(task.answer) + 1);
  task.terminal.reference_steps[1].command = "echo " + wrong + " > /app/answer.txt";
  worker::ScaffoldOptions o;
  o.scaffold = "mini";
  auto examples = worker::ReferenceTurnExamples(task.terminal, o);
  ASSERT_TRUE(examples.ok());
  worker::testing::ScriptedGenerator gen;
  for (const worker::TurnExample& ex : *examples) gen.AddReply(ex.target);
  worker::ChatService service(&gen, worker::ChatServiceOptions());
  auto r = Run(service, task, "mini", "model");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, v1::OK) << r->detail;
  EXPECT_EQ(r->reward, 0.0) << r->detail;
  EXPECT_EQ(r->steps, 2);
}

TEST_F(LookupSandboxTest, MixedDemonstratorEpisodesReplayTokenForTokenInRealSandboxes) {
  // The main job's warm start (look=20&via=cp): replayed in real sandboxes, a cp episode earns 1,
  // a guess earns 1 only when it is the number, and the stored trajectory is exactly the rendered
  // reference, so the demonstrated `ls /app/data` output is what the sandbox prints.
  std::vector<Task> tasks = Tasks("builtin:lookup?files=1&max=9&look=20&via=cp", 40);
  int copies = 0, right_guesses = 0, wrong_guesses = 0;
  for (const Task& task : tasks) {
    const std::string& last = task.terminal.reference_steps[1].command;
    const bool copy = last.rfind("cp ", 0) == 0;
    const bool right = last == "echo " + task.answer + " > /app/answer.txt";
    if ((copy && copies > 0) || (!copy && right && right_guesses > 0) || (!copy && !right && wrong_guesses > 0)) continue;
    copies += copy;
    right_guesses += !copy && right;
    wrong_guesses += !copy && !right;
    SCOPED_TRACE(task.id + " / " + last);
    worker::ScaffoldOptions o;
    o.scaffold = "mini";
    auto examples = worker::ReferenceTurnExamples(task.terminal, o);
    auto reference = worker::ReferenceTrajectoryTokens(task.terminal, o);
    ASSERT_TRUE(examples.ok() && reference.ok());
    worker::testing::ScriptedGenerator gen;
    for (const worker::TurnExample& ex : *examples) gen.AddReply(ex.target);
    worker::ChatServiceOptions so;
    so.store = store_.get();
    worker::ChatService service(&gen, so);
    auto r = Run(service, task, "mini", "model");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->reward, copy || right ? 1.0 : 0.0) << r->detail;
    EXPECT_EQ(r->steps, 2);
    auto stored = store_->Get(r->trajectory_id);
    ASSERT_TRUE(stored.ok()) << stored.status();
    ASSERT_EQ(stored->segments_size(), 1);
    EXPECT_EQ(worker::testing::Flatten(stored->segments(0)).ids, reference->tokens);
  }
  EXPECT_EQ(copies, 1);
  EXPECT_EQ(wrong_guesses, 1);
  EXPECT_LE(right_guesses, 1);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
