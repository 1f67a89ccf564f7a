// `flotilla synth` end to end on one small real project: toolz from its Debian source package
// (scripts/synth-fetch-sources.sh, from the machine's own apt configuration). Three tasks are
// synthesized; `flotilla eval` scores each 1 with the oracle and 0 with nop; the synthesizer's
// hackability probes (deleting or editing the tests, replacing the runner, leaks) passed for
// each; a rerun resumes without trying anything again; a tree without tests is refused with
// a report. Needs root, debootstrap and the apt mirror; skips visibly otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* k, const char* d) {
  const char* v = std::getenv(k);
  return v == nullptr ? d : v;
}

struct Ran {
  int status = -1;
  std::string out;
};

Ran Exec(const testing::TempDir& dir, const std::string& name, std::vector<std::string> argv) {
  std::string log = dir.file(name + ".log");
  pid_t pid = ::fork();
  if (pid == 0) {
    if (freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(126);
    dup2(1, 2);
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    ::execv(a[0], a.data());
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

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class SynthE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, debootstrap, apt-get source)";
    if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
    if (!fs::exists("/etc/debian_version")) GTEST_SKIP() << "host is not Debian: no apt mirror";
    bin_ = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
    store_ = Env("FLOTILLA_ENV_STORE", "/var/lib/flotilla");
  }
  std::string bin_, store_;
};

TEST_F(SynthE2eTest, ToolzTasksPassOracleFailNopAndResist) {
  testing::TempDir dir;
  Ran fetch = Exec(dir, "fetch", {"/bin/bash", Env("FLOTILLA_SOURCE_DIR", ".") + "/scripts/synth-fetch-sources.sh",
                                  dir.file("src"), "toolz"});
  if (fetch.status != 0) GTEST_SKIP() << "apt-get source toolz failed (no deb-src reachable):\n" << fetch.out;
  std::string tasks = dir.file("tasks");
  std::vector<std::string> synth = {bin_, "synth", "--repo", dir.file("src/toolz"), "--out", tasks,
                                    "--max-tasks", "3", "--max-candidates", "60", "--env-store", store_};
  Ran s = Exec(dir, "synth", synth);
  ASSERT_EQ(s.status, 0) << s.out;
  EXPECT_NE(s.out.find("environment: "), std::string::npos) << s.out;
  EXPECT_NE(s.out.find(" valid=3 "), std::string::npos) << s.out;

  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(tasks)) {
    if (fs::exists(e.path() / "task.toml")) folders.push_back(e.path());
  }
  ASSERT_EQ(folders.size(), 3u);
  for (const fs::path& f : folders) {
    std::string toml = Read(f / "task.toml");
    EXPECT_NE(toml.find("package = \"toolz\""), std::string::npos) << toml;
    EXPECT_NE(toml.find("version = \"0.12.0-1\""), std::string::npos) << toml;
    EXPECT_NE(toml.find("fail_to_pass = [\""), std::string::npos) << toml;
    EXPECT_FALSE(fs::exists(f / "environment" / "repo" / ".git"));
    EXPECT_FALSE(fs::exists(f / "environment" / "repo" / "debian"));
    EXPECT_TRUE(fs::exists(f / "tests" / "test.sh"));
    EXPECT_TRUE(fs::exists(f / "solution" / "solve.sh"));
  }
  // The synthesizer's own probes (oracle, nop, delete-tests, edit-tests, replace-runner, leak).
  Ran stats = Exec(dir, "stats", {bin_, "synth", "stats", "--out", tasks});
  ASSERT_EQ(stats.status, 0) << stats.out;
  EXPECT_NE(stats.out.find("seconds_per_valid_task="), std::string::npos) << stats.out;
  for (const fs::path& f : folders) EXPECT_EQ(Read(f / "tests" / "runner.sha256").size(), 65u);

  for (const auto& [agent, passed] : {std::pair<std::string, std::string>{"oracle", "3"}, {"nop", "0"}}) {
    Ran ev = Exec(dir, "eval-" + agent, {bin_, "eval", "--tasks", tasks, "--state-dir", dir.file("state-" + agent),
                                         "--harness", "mini", "--agent", agent, "--env-store", store_});
    ASSERT_EQ(ev.status, 0) << ev.out;
    EXPECT_NE(ev.out.find("eval: harness=mini tasks=3 passed=" + passed), std::string::npos) << agent << "\n" << ev.out;
  }

  // A rerun resumes: nothing is tried again, the same three tasks are reported.
  Ran again = Exec(dir, "synth-again", synth);
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_NE(again.out.find("environment: resumed"), std::string::npos) << again.out;
  EXPECT_EQ(again.out.find("synth: validate ["), std::string::npos) << again.out;
  EXPECT_NE(again.out.find(" valid=3 "), std::string::npos) << again.out;
}

TEST_F(SynthE2eTest, TreeWithoutTestsEndsWithAReport) {
  testing::TempDir dir;
  fs::create_directories(dir.file("repo/pkg"));
  std::ofstream(dir.file("repo/pkg/core.py")) << "def f():\n    return 1\n";
  Ran s = Exec(dir, "synth", {bin_, "synth", "--repo", dir.file("repo"), "--out", dir.file("out"), "--env-store", store_});
  EXPECT_EQ(s.status, 1) << s.out;
  EXPECT_NE(s.out.find("no test suite found (1 Python files but no test files)"), std::string::npos) << s.out;
  std::string report = Read(dir.file("out/REPORT.txt"));
  EXPECT_NE(report.find("environment: "), std::string::npos) << report;
  EXPECT_NE(report.find("refused"), std::string::npos) << report;
}

}  // namespace
}  // namespace flotilla::synth
