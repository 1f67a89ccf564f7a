// Every daemon stops in order on SIGINT and SIGTERM, whenever the signal comes: once it serves,
// or while it starts (its first threads exist, it does not serve yet). The signal is taken by
// its ShutdownSignals, never by a default action in one of its threads: `flotilla up` and
// `flotilla worker` blocked the signals only after their threads existed, and a signal during
// start-up killed them outright.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/temp_dir.h"

namespace flotilla::cli {
namespace {

using testing::Env;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct DaemonCase {
  std::string name;
  std::vector<std::string> args;  // after the binary; "@" is replaced by the temp dir
  std::string ready;              // printed once it serves, or (during_startup) while it starts
  int signal;
  bool during_startup;
};

class DaemonSignalTest : public ::testing::TestWithParam<DaemonCase> {};

TEST_P(DaemonSignalTest, StopsInOrderAndExitsZero) {
  const DaemonCase& c = GetParam();
  testing::TempDir dir;
  const std::string log = dir.file("daemon.log");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(126);
    dup2(1, 2);
    std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
    std::vector<std::string> full = {bin};
    for (std::string a : c.args) full.push_back(a == "@" ? dir.path().string() : a);
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool ready = false;
  while (!ready && std::chrono::steady_clock::now() < deadline) {
    int early = 0;
    ASSERT_EQ(::waitpid(pid, &early, WNOHANG), 0) << c.name << " ended before the signal:\n" << ReadFile(log);
    ready = ReadFile(log).find(c.ready) != std::string::npos;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(c.during_startup ? 1 : 50));
  }
  if (!ready) ::kill(pid, SIGKILL);
  ASSERT_TRUE(ready) << ReadFile(log);
  ASSERT_EQ(::kill(pid, c.signal), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_FALSE(WIFSIGNALED(status)) << c.name << " was killed by signal " << WTERMSIG(status) << ":\n"
                                    << ReadFile(log);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << ReadFile(log);
}

std::vector<DaemonCase> Cases() {
  std::vector<DaemonCase> out;
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string s = sig == SIGINT ? "Sigint" : "Sigterm";
    for (const char* cmd : {"up", "worker"}) {
      const std::string name = std::string(cmd) == "up" ? "Up" : "Worker";
      const std::vector<std::string> args = {cmd, std::string(cmd) == "up" ? "--http" : "--listen", "127.0.0.1:0",
                                             "--state-dir", "@", "--threads", "2"};
      out.push_back({name + s, args, "serving", sig, false});
      // Its first line, with a fresh state dir: the engine's and the store's threads are
      // starting, nothing serves yet.
      out.push_back({name + s + "WhileStarting", args, "writing the embedded default model", sig, true});
    }
    out.push_back({"Scheduler" + s, {"scheduler", "--listen", "127.0.0.1:0", "--state-dir", "@"}, "listening", sig,
                   false});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Daemons, DaemonSignalTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<DaemonCase>& i) { return i.param.name; });

}  // namespace
}  // namespace flotilla::cli
