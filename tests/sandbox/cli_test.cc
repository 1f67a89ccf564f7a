// The `flotilla` binary for real: exit statuses of `sandbox run`, and leftover cleanup after
// the CLI is killed with a sandbox running.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "flotilla/sandbox/runtime.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace flotilla::sandbox {
namespace {

std::string Flotilla() { return std::string(std::getenv("FLOTILLA_BINARY_DIR") ?: "..") + "/cli/flotilla"; }

struct Ran {
  int status = -1;
  std::string out, err;
};

// Runs the CLI with `args`, capturing stdout and stderr into files.
Ran RunCli(const flotilla::testing::TempDir& dir, std::vector<std::string> args) {
  std::string out = dir.file("out.txt"), err = dir.file("err.txt");
  pid_t pid = ::fork();
  if (pid == 0) {
    freopen(out.c_str(), "w", stdout);
    freopen(err.c_str(), "w", stderr);
    std::vector<char*> argv;
    std::string bin = Flotilla();
    argv.push_back(bin.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(126);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  Ran r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::ifstream o(out), e(err);
  r.out.assign(std::istreambuf_iterator<char>(o), {});
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

class SandboxCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    if (::access(Flotilla().c_str(), X_OK) != 0) GTEST_SKIP() << "no flotilla binary at " << Flotilla();
  }
  flotilla::testing::TempDir dir_;
  std::string state() const { return dir_.file("state"); }
};

TEST_F(SandboxCliTest, ExitStatusIsTheCommands) {
  Ran r = RunCli(dir_, {"sandbox", "run", "--state-dir", state(), "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  r = RunCli(dir_, {"sandbox", "run", "--state-dir", state(), "--", "/bin/sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(r.status, 128 + SIGTERM);
  EXPECT_EQ(r.err, "");
  r = RunCli(dir_, {"sandbox", "run", "--state-dir", state(), "--timeout", "200ms", "--", "/bin/sleep", "10"});
  EXPECT_EQ(r.status, 128 + SIGKILL);
  EXPECT_EQ(r.err, "flotilla: sandbox stopped the command: timeout (exec timeout of 200 ms reached)\n");
  r = RunCli(dir_, {"sandbox", "run", "--state-dir", state(), "--memory", "lots", "--", "/bin/true"});
  EXPECT_EQ(r.status, 125);
  EXPECT_TRUE(absl::StartsWith(r.err, "flotilla sandbox run: --memory: ")) << r.err;
  r = RunCli(dir_, {"sandbox", "run", "--state-dir", state(), "--", "/bin/true"});
  EXPECT_EQ(r.status, 0);
  // Nothing of those runs is left.
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(state() + "/run", ec)) ADD_FAILURE() << e.path();
}

// The cgroups of runtime `instance`'s sandboxes ("<instance>.<sandbox id>") under the
// "flotilla" prefix of hierarchy `root`; with `running`, only those with a process in them.
std::vector<std::string> SandboxCgroupsOf(const std::string& root, const std::string& instance, bool running = false) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& c : std::filesystem::directory_iterator(root + "/flotilla", ec)) {
    const std::string name = c.path().filename().string();
    // `instance` may also be a prefix ending in '-' ("i<pid>-").
    if (!c.is_directory(ec) || !absl::StartsWith(name, absl::EndsWith(instance, "-") ? instance : instance + ".")) {
      continue;
    }
    std::ifstream procs(c.path() / "cgroup.procs");
    std::string first;
    if (!running || std::getline(procs, first)) out.push_back(c.path().string());
  }
  return out;
}

TEST_F(SandboxCliTest, LeftoversOfAKilledRunAreCleanedAtStart) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string bin = Flotilla(), st = state();
    ::execl(bin.c_str(), bin.c_str(), "sandbox", "run", "--state-dir", st.c_str(), "--", "/bin/sleep", "100", nullptr);
    ::_exit(126);
  }
  // Wait until its sandbox runs, then kill the CLI without a chance to clean up. Its runtime
  // instance is named "i<pid>-...".
  std::string instance;
  for (int i = 0; i < 1000 && instance.empty(); ++i) {
    for (const char* root : {"/sys/fs/cgroup/memory", "/sys/fs/cgroup"}) {
      for (const std::string& cg : SandboxCgroupsOf(root, "i" + std::to_string(pid) + "-", true)) {
        std::string name = std::filesystem::path(cg).filename().string();
        instance = name.substr(0, name.find('.'));
      }
    }
    if (instance.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(instance.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::kill(pid, SIGKILL);
  int st;
  ::waitpid(pid, &st, 0);
  EXPECT_FALSE(SandboxCgroupsOf("/sys/fs/cgroup/memory", instance).empty() &&
               SandboxCgroupsOf("/sys/fs/cgroup", instance).empty());
  RuntimeOptions o;
  o.state_dir = state();
  auto rt = Runtime::Open(o);  // cleans up at start
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_FALSE(std::filesystem::exists(state() + "/run/" + instance));
  EXPECT_EQ(SandboxCgroupsOf("/sys/fs/cgroup/memory", instance), std::vector<std::string>{});
  EXPECT_EQ(SandboxCgroupsOf("/sys/fs/cgroup/unified", instance), std::vector<std::string>{});
  std::ifstream mi("/proc/self/mountinfo");
  std::string mounts(std::istreambuf_iterator<char>(mi), {});
  EXPECT_FALSE(absl::StrContains(mounts, instance));
  auto again = (*rt)->CleanupLeftovers();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sandboxes + again->cgroups + again->mounts + again->processes, 0);
}

// flotilla-full (every command) takes its runtimes' zygote from the static flotilla-zygote next
// to it (from the small `flotilla` where no flotilla-zygote was built); a create -> exec ->
// destroy through that zygote.
TEST_F(SandboxCliTest, FullBinaryRunsSandboxesFromTheSmallZygoteBinary) {
  Ran r = RunCli(dir_, {"bench", "sandbox", "--n", "2", "--concurrency", "1", "--cli-n", "0", "--idle", "0",
                        "--no-runc", "--state-dir", dir_.path().string()});
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string zygote = Flotilla() + "-zygote";
  const std::string expected = ::access(zygote.c_str(), X_OK) == 0 ? zygote : Flotilla();
  EXPECT_TRUE(absl::StrContains(r.out, "sandbox.zygote=" + std::filesystem::canonical(expected).string() + "\n"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "sandbox.p50_ms=")) << r.out;
}

}  // namespace
}  // namespace flotilla::sandbox
