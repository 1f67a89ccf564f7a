// The difficulty stage's pure parts: labels, the band's syntax, task.toml's difficulty record,
// and synth.db's difficulty rows (the sandbox part is synth_difficulty_e2e_test).
#include <string>

#include "flotilla/synth/difficulty.h"
#include "flotilla/synth/synth_state.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::synth {
namespace {

TEST(DifficultyTest, LabelsFollowTheSolveRate) {
  EXPECT_EQ(DifficultyLabel(4, 4), "easy");
  EXPECT_EQ(DifficultyLabel(3, 4), "easy");      // 0.75
  EXPECT_EQ(DifficultyLabel(7, 10), "easy");     // 0.7: the lower bound of easy
  EXPECT_EQ(DifficultyLabel(2, 3), "medium");    // 0.667
  EXPECT_EQ(DifficultyLabel(2, 4), "medium");
  EXPECT_EQ(DifficultyLabel(3, 10), "medium");   // 0.3: the lower bound of medium
  EXPECT_EQ(DifficultyLabel(1, 4), "hard");
  EXPECT_EQ(DifficultyLabel(1, 100), "hard");
  EXPECT_EQ(DifficultyLabel(0, 4), "unsolved");
  EXPECT_EQ(DifficultyLabel(0, 0), "unknown");
}

eval::TrialResult Attempt(int n, double reward, const std::string& error = "", const std::string& detail = "") {
  eval::TrialResult r;
  r.attempt = n;
  r.reward = reward;
  r.error_type = error;
  r.detail = detail;
  r.seconds = 1.5;
  return r;
}

TEST(DifficultyTest, AttemptsMakeTheRowTimeoutsCountAsUnsolved) {
  auto row = SummarizeAttempts("t", "mini@m", {Attempt(1, 1), Attempt(2, 0), Attempt(3, 0, "agent_timeout"),
                                               Attempt(4, 1)});
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->task, "t");
  EXPECT_EQ(row->policy, "mini@m");
  EXPECT_EQ(row->attempts, 4);
  EXPECT_EQ(row->solved, 2);
  EXPECT_EQ(row->solve_rate, 0.5);
  EXPECT_EQ(row->label, "medium");
  EXPECT_EQ(row->reason, "solved 2 of 4 attempts by mini@m (1 ran out of time)");
  EXPECT_EQ(row->seconds, 6.0);
  // A reward below 1 is not solved (eval's pass).
  auto partial = SummarizeAttempts("t", "oracle", {Attempt(1, 0.5)});
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->label, "unsolved");
  EXPECT_EQ(partial->reason, "solved 0 of 1 attempts by oracle");
}

TEST(DifficultyTest, PlatformErrorsLeaveTheTaskUnknown) {
  for (const char* error : {"env_build_failed", "agent_error", "sandbox_crashed", "verifier_error", "verifier_timeout"}) {
    EXPECT_FALSE(AttemptCounts(Attempt(1, 0, error))) << error;
  }
  EXPECT_TRUE(AttemptCounts(Attempt(1, 0, "agent_timeout")));
  auto row = SummarizeAttempts("t", "mini@m", {Attempt(1, 1), Attempt(2, 0, "sandbox_crashed", "node lost")});
  ASSERT_EQ(row.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(row.status().message(),
            "1 of 2 attempts by mini@m ended in a platform error; a rerun tries them again: attempt 2: "
            "sandbox_crashed: node lost");
  EXPECT_EQ(SummarizeAttempts("t", "nop", {}).status().message(), "no attempt by nop ran");
}

TEST(DifficultyTest, OptionsAreCheckedBeforeAnythingRuns) {
  DifficultyOptions o;
  EXPECT_TRUE(CheckDifficultyOptions(o).ok());  // no agent: not measured
  for (const char* agent : {"oracle", "nop", "mini", "terminal"}) {
    o.agent = agent;
    EXPECT_TRUE(CheckDifficultyOptions(o).ok()) << agent;
  }
  o.agent = "codex";
  EXPECT_EQ(CheckDifficultyOptions(o).message(),
            "--difficulty-agent 'codex': expected oracle, nop, mini or terminal (agent CLIs: measure with `flotilla "
            "eval -p DIR -a CLI -k N`)");
  o.agent = "mini";
  o.attempts = -1;
  EXPECT_EQ(CheckDifficultyOptions(o).message(), "--difficulty-attempts: must be 0 (not measured) or more");
  o.attempts = 0;
  o.concurrency = 0;
  EXPECT_EQ(CheckDifficultyOptions(o).message(), "--difficulty-concurrency: must be at least 1");
}

TEST(DifficultyTest, BandIsLoColonHiWithinZeroAndOne) {
  auto b = ParseDifficultyBand("0.25:0.75");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->lo, 0.25);
  EXPECT_EQ(b->hi, 0.75);
  ASSERT_TRUE(ParseDifficultyBand("0:0").ok());
  ASSERT_TRUE(ParseDifficultyBand("1:1").ok());
  for (const char* bad : {"0.5", "0.8:0.2", "-0.1:0.5", "0:1.5", "a:b", "0:0.5:1", ""}) {
    auto r = ParseDifficultyBand(bad);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().message(), std::string("--difficulty-band '") + bad +
                                        "': expected LO:HI with 0 <= LO <= HI <= 1 (e.g. 0.1:0.9)");
  }
}

DifficultyRow Row(int solved, int attempts) {
  DifficultyRow r;
  r.task = "tally-001-flip_compare";
  r.policy = "mini@qwen";
  r.attempts = attempts;
  r.solved = solved;
  r.solve_rate = static_cast<double>(solved) / attempts;
  r.label = DifficultyLabel(solved, attempts);
  r.reason = "solved 3 of 4 attempts by mini@qwen";
  return r;
}

TEST(DifficultyTest, TaskTomlGetsTheLabelAndOneDifficultyTable) {
  // As the task writer leaves it: [metadata] difficulty unknown, a reason in [synth].
  const std::string written =
      "version = \"1.0\"\n\n[metadata]\ndifficulty = \"unknown\"\ncategory = \"debugging\"\n\n"
      "[synth]\npackage = \"tally\"\ndifficulty_reason = \"no model configured: solve rate not measured\"\n\n"
      "[synth.timings]\nvalidate_seconds = 1.5\n";
  const std::string once = TaskTomlWithDifficulty(written, Row(3, 4), "no band given");
  EXPECT_EQ(once,
            "version = \"1.0\"\n\n[metadata]\ndifficulty = \"easy\"\ncategory = \"debugging\"\n\n"
            "[synth]\npackage = \"tally\"\n\n[synth.timings]\nvalidate_seconds = 1.5\n\n"
            "[synth.difficulty]\nsolve_rate = 0.75\nattempts = 4\nsolved = 3\nlabel = \"easy\"\n"
            "policy = \"mini@qwen\"\nreason = \"solved 3 of 4 attempts by mini@qwen\"\nband = \"no band given\"\n");
  // Measured again (another band): the table is replaced, not repeated.
  const std::string twice = TaskTomlWithDifficulty(once, Row(1, 4), "excluded: solve rate 0.25 below the band [0.5, 1]");
  EXPECT_EQ(twice,
            "version = \"1.0\"\n\n[metadata]\ndifficulty = \"hard\"\ncategory = \"debugging\"\n\n"
            "[synth]\npackage = \"tally\"\n\n[synth.timings]\nvalidate_seconds = 1.5\n\n"
            "[synth.difficulty]\nsolve_rate = 0.25\nattempts = 4\nsolved = 1\nlabel = \"hard\"\n"
            "policy = \"mini@qwen\"\nreason = \"solved 3 of 4 attempts by mini@qwen\"\n"
            "band = \"excluded: solve rate 0.25 below the band [0.5, 1]\"\n");
}

TEST(DifficultyTest, HandMadeTaskTomlWithoutADifficultyGetsOne) {
  EXPECT_EQ(TaskTomlWithDifficulty("version = \"1.0\"\n\n[metadata]\ncategory = \"x\"\n\n[agent]\ntimeout_sec = 60.0\n",
                                   Row(0, 2), "no band given"),
            "version = \"1.0\"\n\n[metadata]\ncategory = \"x\"\ndifficulty = \"unsolved\"\n\n[agent]\ntimeout_sec = "
            "60.0\n\n[synth.difficulty]\nsolve_rate = 0\nattempts = 2\nsolved = 0\nlabel = \"unsolved\"\n"
            "policy = \"mini@qwen\"\nreason = \"solved 3 of 4 attempts by mini@qwen\"\nband = \"no band given\"\n");
  // No [metadata] at all: only the table is added.
  EXPECT_EQ(TaskTomlWithDifficulty("[agent]\ntimeout_sec = 60.0", Row(2, 2), "b"),
            "[agent]\ntimeout_sec = 60.0\n\n[synth.difficulty]\nsolve_rate = 1\nattempts = 2\nsolved = 2\n"
            "label = \"easy\"\npolicy = \"mini@qwen\"\nreason = \"solved 3 of 4 attempts by mini@qwen\"\nband = \"b\"\n");
}

TEST(DifficultyTest, StateKeepsOneRowPerTaskAndPolicy) {
  testing::TempDir d;
  auto st = SynthState::Open(d.file("synth.db"));
  ASSERT_TRUE(st.ok()) << st.status();
  auto none = (*st)->Difficulty("a", "oracle");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  DifficultyRow r = Row(3, 4);
  r.task = "a";
  r.policy = "oracle";
  r.seconds = 2.5;
  ASSERT_TRUE((*st)->SetDifficulty(r).ok());
  r.policy = "nop";
  r.solved = 0;
  r.solve_rate = 0;
  r.label = "unsolved";
  ASSERT_TRUE((*st)->SetDifficulty(r).ok());
  r.solved = 1;  // replaces (a, nop)
  ASSERT_TRUE((*st)->SetDifficulty(r).ok());
  auto all = (*st)->Difficulties();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].policy, "nop");
  EXPECT_EQ((*all)[0].solved, 1);
  EXPECT_EQ((*all)[1].policy, "oracle");
  EXPECT_EQ((*all)[1].solved, 3);
  EXPECT_EQ((*all)[1].attempts, 4);
  EXPECT_EQ((*all)[1].solve_rate, 0.75);
  EXPECT_EQ((*all)[1].label, "easy");
  EXPECT_EQ((*all)[1].seconds, 2.5);
}

}  // namespace
}  // namespace flotilla::synth
