// The main job in a short form: `flotilla run` on the arith-grpo example for one minute of RL —
// SFT warm start, async GRPO with every sample a single-turn worker episode in its own sandbox
// and checkpoint switches — ending with the summary line the README promises.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "flotilla/trainer_bridge/experiment_store.h"
#include "gtest/gtest.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

std::string Env(const char* k, const char* d) {
  const char* v = std::getenv(k);
  return v == nullptr ? d : v;
}

TEST(MainJobE2eTest, ShortRunEndsWithTheSummaryLine) {
  testing::TempDir dir;
  std::filesystem::copy_file(Env("FLOTILLA_SOURCE_DIR", ".") + "/examples/arith-grpo/experiment.yaml",
                             dir.file("experiment.yaml"));
  std::string cmd = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla run --fresh " + dir.file("experiment.yaml") +
                    " --minutes 1 2>&1";
  int rc = 0;
  const std::string out = testing::RunShell(cmd, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string last = out.substr(out.rfind("run: "));
  std::smatch m;
  std::regex re(
      R"(^run: reward_start=([0-9.]+) reward_end=([0-9.]+) steps=([0-9]+) minutes=([0-9.]+) scaffold=single-turn )"
      R"(turns_mean=([0-9.]+) tool_calls_mean=([0-9.]+) sandboxes=([0-9]+)\n?$)");
  ASSERT_TRUE(std::regex_match(last, m, re)) << last;
  int steps = std::stoi(m[3]);
  EXPECT_GE(steps, 2) << out;
  EXPECT_LT(std::stod(m[4]), 5.0);
  EXPECT_NE(out.find("published v0; starting grpo"), std::string::npos) << out;
  auto store = ExperimentStore::Open(dir.file("runs/arith-grpo/trajectories.db"), "arith-grpo");
  ASSERT_TRUE(store.ok());
  auto rewards = (*store)->Rewards();
  ASSERT_TRUE(rewards.ok());
  EXPECT_GE(rewards->size(), static_cast<size_t>(steps) * 64);
  for (double r : *rewards) EXPECT_TRUE(r == 0.0 || r == 1.0);
  EXPECT_EQ(std::stod(m[5]), 1.0);  // one model turn per single-turn sample
  EXPECT_EQ(std::stod(m[6]), 0.0);
  // A sandbox per sample, each placed by the scheduler.
  auto figures = (*store)->Figures();
  ASSERT_TRUE(figures.ok());
  EXPECT_EQ(std::stoll(m[7]), figures->sandboxes);
  EXPECT_EQ(figures->sandboxes, static_cast<int64_t>(rewards->size()) - figures->failed);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
