// The RolloutRunner's one path on the real engine and real sandboxes: every sample is a worker
// episode whose trajectory the batch assembler's sample is read from (single-turn prompts are
// exactly the warm start's tokens; a multi-turn sample masks what the scaffold added), and a
// sandbox that cannot be created or kills the tests ends the sample as a stored, counted,
// failed trajectory with the configured failure reward.
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>

#include "flotilla/app/embedded_node.h"
#include "flotilla/inference/engine.h"
#include "flotilla/sandbox/runtime.h"
#include "flotilla/trainer_bridge/experiment_store.h"
#include "flotilla/trainer_bridge/rollout_runner.h"
#include "gtest/gtest.h"
#include "inference/test_model.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

std::string TaskDir(const std::string& name) {
  const char* s = std::getenv("FLOTILLA_SOURCE_DIR");
  return std::string(s == nullptr ? "." : s) + "/examples/tasks/" + name;
}

// A dataset of one task, drawn every time.
class OneTask final : public TaskSource {
 public:
  explicit OneTask(Task task) : task_(std::move(task)) {}
  Task Next() override { return task_; }
  std::string family() const override { return task_.family; }

 private:
  const Task task_;
};

inference::ModelConfig Model() {
  inference::ModelConfig c = inference::testing::TinyConfig();
  c.max_context = 4096;
  return c;
}

class RunnerEpisodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    app::EmbeddedNodeOptions no;
    no.state_dir = dir_.file("sandboxes");
    // A cgroup parent of its own per test: the previous test's runtime may still be taking
    // its parent down when the next one starts.
    static int fixture = 0;
    no.cgroup_prefix = "flotilla-episode-test-" + std::to_string(::getpid()) + "-" + std::to_string(++fixture);
    // The samples' sandboxes are idle while the model writes: charged a tenth of a core each.
    no.admission.default_cpu_millicores = 100;
    no.admission.default_memory_bytes = 256ull << 20;
    auto node = app::EmbeddedNode::Start(no);
    if (!node.ok()) GTEST_SKIP() << "sandboxes unavailable here: " << node.status();
    node_ = std::move(*node);
    sandboxes_ = std::make_unique<worker::SandboxClient>(node_->channel());
    ASSERT_TRUE(inference::testing::WriteRandomModel(dir_.file("m.safetensors"), Model(), 3, 0.5f).ok());
    inference::EngineOptions eo;
    eo.threads = 1;
    eo.kv_memory_bytes = 64ull << 20;
    auto e = inference::Engine::Create(eo);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
    ASSERT_TRUE(engine_->LoadModel("policy", Model(), dir_.file("m.safetensors"), 0).ok());
    auto store = ExperimentStore::Open(dir_.file("t.db"), "exp");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  RolloutConfig Rollout(uint32_t group_size, uint32_t groups) {
    RolloutConfig r;
    r.group_size = group_size;
    r.groups_per_step = groups;
    r.max_in_flight = group_size * groups;
    r.staleness = 0;  // exactly `groups` groups until a new version
    r.length_bias.enabled = false;
    return r;
  }

  std::unique_ptr<RolloutRunner> Runner(RolloutController& c, std::map<std::string, std::unique_ptr<TaskSource>> tasks,
                                        const std::string& scaffold, uint32_t max_tokens, double failure_reward = 0) {
    RunnerOptions o;
    o.model = "policy";
    o.experiment = "exp";
    o.scaffold = scaffold;
    o.sandbox_policy = "no-network";
    o.max_new_tokens = max_tokens;
    o.max_turns = 2;
    o.failure_reward = failure_reward;
    o.create_attempts = 2;
    o.episodes = 4;
    o.routing_width = Model().routing_width();
    return std::make_unique<RolloutRunner>(o, *engine_, c, std::move(tasks), *sandboxes_, store_.get(), clock_);
  }

  flotilla::testing::TempDir dir_;
  SystemClock clock_;
  std::unique_ptr<app::EmbeddedNode> node_;
  std::unique_ptr<worker::SandboxClient> sandboxes_;
  std::unique_ptr<inference::Engine> engine_;
  std::unique_ptr<ExperimentStore> store_;
};

TEST_F(RunnerEpisodeTest, SingleTurnSampleIsItsSessionsTokens) {
  const Task task{"arith:2+3=", "arith", "2+3=", "5", {}};
  RolloutController c(Rollout(2, 1), {DatasetConfig{"d", "builtin:arith", "d", 1, 0}}, {}, clock_);
  std::map<std::string, std::unique_ptr<TaskSource>> tasks;
  tasks["d"] = std::make_unique<OneTask>(task);
  auto runner = Runner(c, std::move(tasks), "single-turn", 6);
  ASSERT_TRUE(runner->Start().ok());
  auto groups = runner->TakeGroups(1, nullptr);
  ASSERT_EQ(groups.size(), 1u);
  ASSERT_EQ(groups[0].size(), 2u);
  for (const RolloutSample& s : groups[0]) {
    EXPECT_FALSE(s.failed) << s.detail;
    EXPECT_EQ(s.prompt, runner->RenderPrompt(task, 0)) << "the warm start trains on the session's prompt ids";
    // The reply, and the end-of-turn the session closes a reply cut at 6 tokens with (context).
    EXPECT_GT(s.GeneratedTokens(), 0u);
    EXPECT_LE(s.GeneratedTokens(), 6u);
    EXPECT_LE(s.completion.size(), s.GeneratedTokens() + 1u);
    EXPECT_EQ(s.routing.size(), s.completion.size() * Model().routing_width());
    EXPECT_EQ(s.turns, 1u);
    EXPECT_EQ(s.tool_calls, 0u);
    EXPECT_TRUE(s.reward == 0.0 || s.reward == 1.0);
    EXPECT_GT(s.sandbox_ms, 0.0);
    ASSERT_EQ(s.turn_starts.size(), 2u);
    EXPECT_EQ(s.turn_starts[0], 0u);
  }
  runner->Stop();
  RunnerStats st = runner->Stats();
  EXPECT_EQ(st.sandboxes, 2u);
  EXPECT_EQ(st.failed_samples, 0u);
  // Their sandboxes were destroyed off the samples' path, and Stop waited for it.
  EXPECT_GT(st.sandbox_release_ms, 0.0);
  EXPECT_TRUE(node_->runtime().List().empty());
  auto stored = store_->LoadGroup(0);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[0].completion, groups[0][0].completion);
  auto fig = store_->Figures();
  ASSERT_TRUE(fig.ok());
  EXPECT_EQ(fig->samples, 2);
  EXPECT_EQ(fig->sandboxes, 2);
  EXPECT_EQ(fig->turns_mean, 1.0);
}

TEST_F(RunnerEpisodeTest, MultiTurnSampleMasksWhatTheScaffoldAdded) {
  auto loaded = worker::LoadTerminalTask(TaskDir("hello-file"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  Task task{"hello-file", "terminal", loaded->instruction, "", *loaded};
  RolloutController c(Rollout(1, 1), {DatasetConfig{"d", "tasks", "d", 1, 0}}, {}, clock_);
  std::map<std::string, std::unique_ptr<TaskSource>> tasks;
  tasks["d"] = std::make_unique<OneTask>(task);
  auto runner = Runner(c, std::move(tasks), "mini", 12);
  ASSERT_TRUE(runner->Start().ok());
  auto groups = runner->TakeGroups(1, nullptr);
  ASSERT_EQ(groups.size(), 1u);
  const RolloutSample& s = groups[0][0];
  EXPECT_FALSE(s.failed) << s.detail;
  EXPECT_EQ(s.turns, 2u);  // the random model never submits: both turns are used
  EXPECT_EQ(s.reward, 0.0);
  // Two replies with the scaffold's answer to the first between them: that answer is context.
  const uint32_t generated = s.GeneratedTokens();
  EXPECT_GT(generated, 0u);
  EXPECT_LE(generated, 24u);
  EXPECT_LT(generated, s.completion.size());
  ASSERT_EQ(s.loss_mask.size(), s.completion.size());
  EXPECT_EQ(s.loss_mask.front(), 1);
  EXPECT_EQ(s.routing.size(), s.completion.size() * s.routing_width);
  for (size_t i = 0; i < s.completion.size(); ++i) {
    if (s.loss_mask[i] != 0) continue;
    EXPECT_EQ(s.versions[i], -1);
    EXPECT_EQ(s.logprobs[i], 0.0f);
    EXPECT_EQ(s.routing[i * s.routing_width], -1);
  }
  EXPECT_GE(s.turn_starts.size(), 4u);  // system, user, reply, scaffold's answer, reply
  EXPECT_TRUE(std::is_sorted(s.turn_starts.begin(), s.turn_starts.end()));
  runner->Stop();
}

TEST_F(RunnerEpisodeTest, FailedSandboxesEndAsStoredFailedTrajectoriesWithTheFailureReward) {
  // One task no node can admit (a terabyte of memory), one whose tests the sandbox kills for
  // running out of memory.
  Task huge{"huge", "terminal", "say hi", "", {}};
  huge.terminal.name = "huge";
  huge.terminal.instruction = "say hi";
  huge.terminal.memory_bytes = 1ull << 40;
  huge.terminal.test_command = {"/bin/sh", "-c", "true"};
  Task oom = huge;
  oom.id = oom.terminal.name = "oom";
  oom.terminal.memory_bytes = 32ull << 20;
  oom.terminal.cpus = 0.1;  // both samples' sandboxes fit the node's CPU at once
  oom.terminal.test_command = {"/bin/sh", "-c", "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo ${#x}"};
  RolloutController c(Rollout(2, 2), {DatasetConfig{"huge", "x", "huge", 1, 0}, DatasetConfig{"oom", "x", "oom", 1, 0}},
                      {}, clock_);
  std::map<std::string, std::unique_ptr<TaskSource>> tasks;
  tasks["huge"] = std::make_unique<OneTask>(huge);
  tasks["oom"] = std::make_unique<OneTask>(oom);
  auto runner = Runner(c, std::move(tasks), "single-turn", 4, /*failure_reward=*/-0.5);
  ASSERT_TRUE(runner->Start().ok());
  auto groups = runner->TakeGroups(2, nullptr);
  ASSERT_EQ(groups.size(), 2u);
  int refused = 0, killed = 0;
  for (const auto& g : groups) {
    ASSERT_EQ(g.size(), 2u);
    for (const RolloutSample& s : g) {
      EXPECT_TRUE(s.failed) << s.task_id << ": " << s.detail;
      EXPECT_EQ(s.reward, -0.5);
      if (s.task_id == "huge") {
        refused += 1;
        EXPECT_NE(s.detail.find("creating the sandbox"), std::string::npos) << s.detail;
        EXPECT_TRUE(s.completion.empty());
      } else {
        killed += 1;
        EXPECT_NE(s.detail.find("OOM"), std::string::npos) << s.detail;
        EXPECT_EQ(s.turns, 1u);
      }
    }
  }
  EXPECT_EQ(refused + killed, 4);
  runner->Stop();
  EXPECT_EQ(runner->Stats().failed_samples, 4u);
  // Stored and counted like every other sample.
  auto fig = store_->Figures();
  ASSERT_TRUE(fig.ok());
  EXPECT_EQ(fig->samples, 4);
  EXPECT_EQ(fig->failed, 4);
  EXPECT_EQ(fig->sandboxes, killed);
  auto rewards = store_->Rewards();
  ASSERT_TRUE(rewards.ok());
  EXPECT_EQ(*rewards, (std::vector<double>(4, -0.5)));
  worker::TrajectoryQuery q;
  q.experiment = "exp";
  q.status = v1::FAILED;
  EXPECT_EQ(*store_->trajectories().Count(q), 4);
}

TEST_F(RunnerEpisodeTest, StopCancelsSamplesInFlightAsInterruptedNotFailed) {
  const Task task{"arith:2+3=", "arith", "2+3=", "5", {}};
  RolloutController c(Rollout(2, 2), {DatasetConfig{"d", "builtin:arith", "d", 1, 0}}, {}, clock_);
  std::map<std::string, std::unique_ptr<TaskSource>> tasks;
  tasks["d"] = std::make_unique<OneTask>(task);
  RunnerOptions o;
  o.model = "policy";
  o.experiment = "exp";
  o.scaffold = "single-turn";
  o.sandbox_policy = "no-network";
  o.max_new_tokens = 3500;
  o.forced_length = [](uint64_t) { return 3500u; };  // none ends before the stop
  o.episodes = 4;
  o.routing_width = Model().routing_width();
  RolloutRunner runner(o, *engine_, c, std::move(tasks), *sandboxes_, store_.get(), clock_);
  ASSERT_TRUE(runner.Start().ok());
  for (int i = 0; i < 3000 && runner.Stats().generating < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(runner.Stats().generating, 4u);
  // Every generation parked where it stands (no sample can end on its own now), then the stop.
  ASSERT_TRUE(runner.Offload().ok());
  runner.Stop();
  const RunnerStats st = runner.Stats();
  EXPECT_EQ(st.cancelled_samples, 4u);
  EXPECT_EQ(st.failed_samples, 0u);
  EXPECT_EQ(st.samples_completed, 0u);
  EXPECT_EQ(st.sandboxes, 4u);
  EXPECT_TRUE(node_->runtime().List().empty());
  // Not lost: each is stored with its status and reason (no group: none was handed on).
  worker::TrajectoryQuery q;
  q.experiment = "exp";
  q.status = v1::INTERRUPTED;
  EXPECT_EQ(*store_->trajectories().Count(q), 4);
  q.status = v1::FAILED;
  EXPECT_EQ(*store_->trajectories().Count(q), 0);
  int reasons = 0;
  q.status = v1::INTERRUPTED;
  ASSERT_TRUE(store_->trajectories()
                  .ForEach(q, [&](const v1::Trajectory& t) -> absl::Status {
                    reasons += t.detail() == "generation stopped: the rollout is shutting down" ? 1 : 0;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(reasons, 4);
  auto fig = store_->Figures();
  ASSERT_TRUE(fig.ok());
  EXPECT_EQ(fig->samples, 0);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
