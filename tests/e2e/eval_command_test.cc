// `flotilla eval` for real: the embedded engine and sandboxes, the built-in harnesses over the
// example task folder. The reference solutions must pass every task and doing nothing must
// fail every one, each run stores one trajectory, and the model itself runs end to end.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "flotilla/worker/trajectory_store.h"
#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/temp_dir.h"

namespace flotilla::cli {
namespace {

using testing::Env;

struct Ran {
  int status = -1;
  std::string out;
};

Ran Eval(const testing::TempDir& dir, std::vector<std::string> args) {
  std::string log = dir.file("eval.txt");
  pid_t pid = ::fork();
  if (pid == 0) {
    if (freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(126);
    dup2(1, 2);
    std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
    std::vector<std::string> full = {bin, "eval", "--tasks", Env("FLOTILLA_SOURCE_DIR", ".") + "/examples/tasks",
                                     "--state-dir", dir.file("state")};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  Ran r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::ifstream in(log);
  r.out.assign(std::istreambuf_iterator<char>(in), {});
  return r;
}

int64_t StoredRuns(const testing::TempDir& dir, const std::string& task = "") {
  auto store = worker::TrajectoryStore::Open(dir.file("state/trajectories.db"));
  if (!store.ok()) return -1;
  worker::TrajectoryQuery q;
  q.experiment = "eval";
  q.task = task;
  auto n = (*store)->Count(q);
  return n.ok() ? *n : -1;
}

bool Has(const std::string& out, const std::string& line) { return out.find(line + "\n") != std::string::npos; }

TEST(EvalCommandTest, ReferenceSolutionsPassEveryTaskOnBothHarnesses) {
  testing::TempDir dir;
  Ran r = Eval(dir, {"--agent", "reference"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "eval: harness=mini tasks=18 passed=18 pass_rate=1.000")) << r.out;
  EXPECT_TRUE(Has(r.out, "eval: harness=terminal tasks=18 passed=18 pass_rate=1.000")) << r.out;
  EXPECT_EQ(StoredRuns(dir), 36);
  EXPECT_EQ(StoredRuns(dir, "hello-file"), 2);
}

TEST(EvalCommandTest, DoingNothingFailsTheFirstNTasks) {
  testing::TempDir dir;
  Ran r = Eval(dir, {"--agent", "none", "--tasks-per-harness", "2", "--harness", "terminal"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(Has(r.out, "eval: harness=terminal tasks=2 passed=0 pass_rate=0.000")) << r.out;
  EXPECT_EQ(r.out.find("harness=mini"), std::string::npos) << r.out;
  EXPECT_EQ(StoredRuns(dir), 2);
  // Name order: c-fix-stack-overflow and count-lines-tb1, not sum-numbers.
  EXPECT_EQ(StoredRuns(dir, "sum-numbers"), 0);
}

TEST(EvalCommandTest, TheModelRunsAndEveryRunIsStored) {
  testing::TempDir dir;
  Ran r = Eval(dir, {"--tasks-per-harness", "1", "--max-steps", "2", "--max-tokens", "16", "--seed", "5"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("eval: harness=mini task=c-fix-stack-overflow reward="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("eval: harness=terminal task=c-fix-stack-overflow reward="), std::string::npos) << r.out;
  EXPECT_EQ(StoredRuns(dir, "c-fix-stack-overflow"), 2);
}

TEST(EvalCommandTest, UnknownHarnessIsAnArgumentError) {
  testing::TempDir dir;
  Ran r = Eval(dir, {"--harness", "mini,swe-agent"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("--harness: unknown harness 'swe-agent' (built-in: mini, terminal)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace flotilla::cli
