// `flotilla run` with a multi-turn scaffold over a folder of Harbor-format tasks: a short
// experiment (two trainer steps of GRPO from a random-init model) where every sample is a mini or
// terminal episode in its own scheduler-placed sandbox running the task's BUILT environment
// (environment/Dockerfile, built through the same cache as `flotilla eval`). The folder holds
// examples/tasks/hello-file and testdata/built-code, whose environment exists only through its
// Dockerfile's RUN step and whose tests give half the reward for finding it: the random model
// solves neither, so every hello-file sample scores exactly 0 and every built-code sample exactly
// 0.5 (0 would mean it ran in the sandbox's default image). Trajectories are stored with more
// than one model turn and the scaffold's text masked; the trainer logs a step per batch; the
// summary line names the scaffold. Needs root and debootstrap (sandboxes, environment builds).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "flotilla/common/metrics_log.h"
#include "flotilla/trainer_bridge/experiment_store.h"
#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

using testing::Env;

class ScaffoldRunE2eTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScaffoldRunE2eTest, ShortExperimentStoresMultiTurnTrajectories) {
  namespace fs = std::filesystem;
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, environment builds)";
  if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
  const std::string scaffold = GetParam();
  testing::TempDir dir;
  const std::string src = fs::absolute(Env("FLOTILLA_SOURCE_DIR", ".")).string();
  const std::string task = dir.file("tasks");
  fs::create_directories(task);
  fs::create_directory_symlink(src + "/examples/tasks/hello-file", task + "/hello-file");
  fs::create_directory_symlink(src + "/tests/trainer_bridge/testdata/built-code", task + "/built-code");
  std::ofstream(dir.file("experiment.yaml")) << "name: scaffold-" << scaffold << "\nstate_dir: run\nseed: 3\n"
      << "scaffold: " << scaffold << "\nsandbox_policy: no-network\n"
      << "policy:\n  model: {vocab_size: 272, n_layers: 2, d_model: 32, n_heads: 2, n_kv_heads: 1, head_dim: 16,\n"
      << "          n_experts: 4, top_k: 2, n_shared_experts: 1, expert_hidden: 32, max_context: 2048}\n"
      << "  init: random\n"
      << "datasets:\n  - {name: tasks, source: \"" << task << "\", weight: 1}\n"
      << "rollout: {group_size: 2, groups_per_step: 1, max_in_flight: 2, staleness: 1, max_new_tokens: 24,\n"
      << "          max_turns: 3, length_bias: {enabled: false}}\n"
      << "trainer: {sft_steps: 0, rl_steps: 2, learning_rate: 0.0003, publish_every: 1}\n";
  std::string cmd = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla run --fresh --env-store '" +
                    Env("FLOTILLA_ENV_STORE", "/var/lib/flotilla") + "' " + dir.file("experiment.yaml") + " 2>&1";
  int rc = 0;
  const std::string out = flotilla::testing::RunShell(cmd, &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string last = out.substr(out.rfind("run: "));
  std::smatch m;
  std::regex re(R"(^run: reward_start=([0-9.]+) reward_end=([0-9.]+) steps=([0-9]+) minutes=([0-9.]+) scaffold=)" +
                scaffold + R"( turns_mean=([0-9.]+) tool_calls_mean=([0-9.]+) sandboxes=([0-9]+)\n?$)");
  ASSERT_TRUE(std::regex_match(last, m, re)) << last;
  EXPECT_GE(std::stoi(m[3]), 2);  // batches sent: the trainer may be handed one beyond its last step
  EXPECT_GT(std::stod(m[5]), 1.0) << out;
  // Steps trained: one metrics line per trainer step, each over one group of two samples.
  auto steps = ReadMetricsLog(dir.file("run/metrics.jsonl"));
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_GE(steps->size(), 2u) << out;
  for (const MetricsLogLine& l : *steps) {
    EXPECT_EQ(l.values.at("samples"), 2.0) << "step " << l.step;
    EXPECT_EQ(l.values.count("trainer/loss"), 1u) << "step " << l.step;
  }
  auto store = ExperimentStore::Open(dir.file("run/trajectories.db"), "scaffold-" + scaffold);
  ASSERT_TRUE(store.ok()) << store.status();
  auto figures = (*store)->Figures();
  ASSERT_TRUE(figures.ok());
  EXPECT_GE(figures->samples, 4);
  EXPECT_EQ(figures->failed, 0);
  EXPECT_EQ(figures->sandboxes, figures->samples);
  EXPECT_EQ(std::stoll(m[7]), figures->sandboxes);
  worker::TrajectoryQuery q;
  q.experiment = "scaffold-" + scaffold;
  int grouped = 0;
  std::map<std::string, int> by_task;
  ASSERT_TRUE((*store)->trajectories().ForEach(q, [&](const v1::Trajectory& t) -> absl::Status {
    if (t.group_id().empty()) return absl::OkStatus();
    grouped += 1;
    EXPECT_EQ(t.scaffold(), scaffold);
    EXPECT_FALSE(t.sandbox_id().empty());
    by_task[t.task()] += 1;
    // The rewards are the tasks' own tests' (see the file comment).
    if (t.task() == "hello-file") {
      EXPECT_EQ(t.reward(), 0.0) << t.id() << ": " << t.detail();
    } else {
      EXPECT_EQ(t.task(), "built-code");
      EXPECT_EQ(t.reward(), 0.5) << t.id() << ": " << t.detail();
    }
    int replies = 0;
    for (const v1::Turn& turn : t.segments(t.segments_size() - 1).turns()) {
      const bool reply = turn.role() == v1::Turn::ASSISTANT;
      replies += reply ? 1 : 0;
      // Only the model's replies are trained on; what the scaffold said never is.
      if (!reply) {
        for (uint32_t mask : turn.tokens().loss_mask()) EXPECT_EQ(mask, 0u);
      }
    }
    EXPECT_GT(replies, 1) << t.id();
    auto sample = ExperimentStore::FromTrajectory(t);
    EXPECT_TRUE(sample.ok()) << sample.status();
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(grouped, figures->samples);
  // A folder is drawn in passes: the first two groups are one of each task.
  EXPECT_GE(by_task["hello-file"], 2);
  EXPECT_GE(by_task["built-code"], 2);
}

INSTANTIATE_TEST_SUITE_P(Scaffolds, ScaffoldRunE2eTest, ::testing::Values("mini", "terminal"));

}  // namespace
}  // namespace flotilla::trainer_bridge
