// Every task of examples/tasks in its built environment, through `flotilla eval`: the oracle
// (the task's reference solution) scores 1 on each and doing nothing scores 0 on each. Needs
// root and debootstrap (the environments are built from the machine's apt mirror, once, then
// come from the store's cache); skips visibly otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/temp_dir.h"

namespace flotilla::environments {
namespace {

namespace fs = std::filesystem;

using testing::Env;

std::vector<std::string> TaskNames() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(Env("FLOTILLA_SOURCE_DIR", ".") + "/examples/tasks")) {
    if (fs::exists(e.path() / "task.toml") || fs::exists(e.path() / "task.yaml")) {
      out.push_back(e.path().filename().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Ran {
  int status = -1;
  std::string out;
};

Ran Eval(const testing::TempDir& dir, const std::string& agent) {
  std::string log = dir.file(agent + ".txt");
  pid_t pid = ::fork();
  if (pid == 0) {
    if (freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(126);
    dup2(1, 2);
    std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
    std::vector<std::string> full = {bin,         "eval",  "--tasks", Env("FLOTILLA_SOURCE_DIR", ".") + "/examples/tasks",
                                     "--state-dir", dir.file("state"), "--harness", "mini", "--agent", agent,
                                     "--env-store", Env("FLOTILLA_ENV_STORE", "/var/lib/flotilla")};
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

class TasksE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, debootstrap)";
    if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
    if (!fs::exists("/etc/debian_version")) GTEST_SKIP() << "host is not Debian: no apt mirror to build from";
  }
};

TEST_F(TasksE2eTest, OraclePassesAndNopFailsEveryExampleInItsBuiltEnvironment) {
  std::vector<std::string> tasks = TaskNames();
  ASSERT_GE(tasks.size(), 15u);
  testing::TempDir dir;
  for (const auto& [agent, reward] : {std::pair<std::string, std::string>{"reference", "1"}, {"none", "0"}}) {
    Ran r = Eval(dir, agent);
    ASSERT_EQ(r.status, 0) << r.out;
    for (const std::string& t : tasks) {
      EXPECT_NE(r.out.find("eval: harness=mini task=" + t + " reward=" + reward + " "), std::string::npos)
          << agent << " on " << t << ":\n"
          << r.out;
    }
    std::string summary = "eval: harness=mini tasks=" + std::to_string(tasks.size()) +
                          " passed=" + (agent == "reference" ? std::to_string(tasks.size()) : "0");
    EXPECT_NE(r.out.find(summary), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace flotilla::environments
