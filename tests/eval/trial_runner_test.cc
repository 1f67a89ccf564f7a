// eval's trial runner, the parts without a sandbox: how an agent name becomes scaffold options
// and how a finished run's outcome becomes an error type (the runs are eval_job_e2e_test's and
// synth_difficulty_e2e_test's).
#include "flotilla/eval/trial_runner.h"

#include "gtest/gtest.h"

namespace flotilla::eval {
namespace {

TEST(TrialRunnerTest, AgentNamesPickScaffoldAndAgent) {
  worker::ScaffoldOptions base;
  base.max_steps = 7;
  for (const auto& [agent, scaffold, runs] :
       {std::tuple<std::string, std::string, std::string>{"oracle", "mini", "reference"},
        {"nop", "mini", "none"},
        {"mini", "mini", "model"},
        {"terminal", "terminal", "model"}}) {
    EXPECT_TRUE(IsBuiltInAgent(agent)) << agent;
    worker::ScaffoldOptions o = AgentScaffoldOptions(agent, base);
    EXPECT_EQ(o.scaffold, scaffold) << agent;
    EXPECT_EQ(o.agent, runs) << agent;
    EXPECT_EQ(o.max_steps, 7u) << agent;
  }
  EXPECT_FALSE(IsBuiltInAgent("pi"));
  EXPECT_FALSE(IsBuiltInAgent(""));
}

TEST(TrialRunnerTest, OutcomesMapToErrorTypes) {
  EXPECT_EQ(TrialErrorType(absl::UnavailableError("no sandbox")), "agent_error");
  worker::ScaffoldResult r;
  r.status = v1::OK;
  r.detail = "agent: submitted; tests exited 0";
  EXPECT_EQ(TrialErrorType(r), "");
  r.detail = "tests exited -1 (timed out)";
  EXPECT_EQ(TrialErrorType(r), "verifier_timeout");
  r.status = v1::TIMED_OUT;
  EXPECT_EQ(TrialErrorType(r), "agent_timeout");
  r.status = v1::CRASHED;
  EXPECT_EQ(TrialErrorType(r), "sandbox_crashed");
  r.status = v1::FAILED;
  r.detail = "no reward file";
  EXPECT_EQ(TrialErrorType(r), "verifier_error");
  r.detail = "the agent CLI exited 1";
  EXPECT_EQ(TrialErrorType(r), "agent_error");
}

}  // namespace
}  // namespace flotilla::eval
