// The main job in a short form: `flotilla run` on the agentic-grpo example (scripts/main-job.sh)
// with its warm start and RL cut to a few steps — SFT warm start, async GRPO with every sample a
// multi-turn `mini` worker episode in its own sandbox and checkpoint switches — ending with the
// summary line the README promises.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "flotilla/trainer_bridge/experiment_store.h"
#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

using testing::Env;

// Replaces the value on the first line of `yaml` that starts (after spaces) with `key: `.
void SetKey(std::string& yaml, const std::string& key, const std::string& value) {
  std::smatch m;
  ASSERT_TRUE(std::regex_search(yaml, m, std::regex("\\n *" + key + ": ([^\\n]*)"))) << key;
  yaml.replace(static_cast<size_t>(m.position(1)), static_cast<size_t>(m.length(1)), value);
}

TEST(MainJobE2eTest, ShortRunEndsWithTheSummaryLine) {
  testing::TempDir dir;
  const std::string source = Env("FLOTILLA_SOURCE_DIR", ".");
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  // The example the main job runs.
  ASSERT_NE(read(source + "/scripts/main-job.sh").find("flotilla run examples/agentic-grpo/experiment.yaml"),
            std::string::npos);
  std::string yaml = read(source + "/examples/agentic-grpo/experiment.yaml");
  // The short form: enough warm start for the format (tool calls), a few RL steps.
  SetKey(yaml, "sft_steps", "60");
  SetKey(yaml, "rl_steps", "2");
  std::ofstream(dir.file("experiment.yaml")) << yaml;
  std::string cmd = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla run --fresh " + dir.file("experiment.yaml") +
                    " 2>&1";
  int rc = 0;
  const std::string out = testing::RunShell(cmd, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string last = out.substr(out.rfind("run: "));
  std::smatch m;
  std::regex re(
      R"(^run: reward_start=([0-9.]+) reward_end=([0-9.]+) steps=([0-9]+) minutes=([0-9.]+) scaffold=mini )"
      R"(turns_mean=([0-9.]+) tool_calls_mean=([0-9.]+) sandboxes=([0-9]+)\n?$)");
  ASSERT_TRUE(std::regex_match(last, m, re)) << last;
  int steps = std::stoi(m[3]);
  // rl_steps 2: the bridge counts the batches it sent, and it may send one ahead of the trainer.
  EXPECT_GE(steps, 2) << out;
  EXPECT_LE(steps, 3) << out;
  EXPECT_LT(std::stod(m[4]), 5.0);
  EXPECT_NE(out.find("published v0; starting grpo"), std::string::npos) << out;
  auto store = ExperimentStore::Open(dir.file("runs/agentic-grpo/trajectories.db"), "agentic-grpo");
  ASSERT_TRUE(store.ok());
  auto rewards = (*store)->Rewards();
  ASSERT_TRUE(rewards.ok());
  EXPECT_GE(rewards->size(), static_cast<size_t>(steps) * 32);
  for (double r : *rewards) EXPECT_TRUE(r == 0.0 || r == 1.0);
  // Multi-turn episodes: the warm start's episode is 2 turns with a tool call before the submit.
  EXPECT_GE(std::stod(m[5]), 2.0) << out;
  EXPECT_GT(std::stod(m[6]), 0.0) << out;
  // A sandbox per sample, each placed by the scheduler.
  auto figures = (*store)->Figures();
  ASSERT_TRUE(figures.ok());
  EXPECT_EQ(std::stoll(m[7]), figures->sandboxes);
  EXPECT_EQ(figures->sandboxes, static_cast<int64_t>(rewards->size()) - figures->failed);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
