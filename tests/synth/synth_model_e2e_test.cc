// `flotilla synth --model-endpoint` end to end on the tally fixture with a scripted
// OpenAI-compatible endpoint (scripted_endpoint.h) in this process: the model's rewrite (a real
// one-bug rewrite of the function it is asked about) is the one candidate tried, validates,
// passes every probe and is written as a task; the endpoint's problem statement quotes the fixed
// line, so it is refused and the deterministic statement written instead, with the reason
// recorded. Needs root and the environment store's base image; skips visibly otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "flotilla/common/text_files.h"
#include "gtest/gtest.h"
#include "scripted_endpoint.h"
#include "testing/daemon_process.h"
#include "testing/logged_run.h"
#include "testing/temp_dir.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

TEST(SynthModelE2eTest, RewriteBecomesATaskAndLeakingStatementIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, environment builds)";
  if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
  if (!fs::exists("/etc/debian_version")) GTEST_SKIP() << "host is not Debian: no apt mirror for the environments";
  const char* store_env = std::getenv("FLOTILLA_ENV_STORE");
  const std::string store = store_env != nullptr ? store_env : "/var/lib/flotilla";
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  const std::string repo = std::string(src != nullptr ? src : ".") + "/tests/synth/testdata/tally";

  std::mutex mu;
  const TallyBug* asked = nullptr;
  ScriptedEndpoint server([&](const ScriptedTurn& t) -> std::string {
    std::lock_guard<std::mutex> l(mu);
    if (t.system.find("realistic bugs") != std::string::npos) {
      asked = BugFor(t.user);
      return asked == nullptr ? "no such function" : "```python\n" + asked->rewrite + "```\n";
    }
    const std::string name = asked == nullptr ? "it" : asked->name;
    return "# " + name + " gives wrong results\n\nThe failing test shows " + name +
           " misbehaving since the last change; the code should say `" +
           (asked == nullptr ? std::string("?") : asked->fixed_line) + "` again.";
  });
  ASSERT_TRUE(server.ok());

  testing::TempDir dir;
  const std::string out = dir.file("tasks"), log = dir.file("synth.log");
  std::vector<std::string> args = {testing::FlotillaBinary(), "synth", "--repo", repo, "--out", out,
                                   "--package", "tally", "--version", "1.0", "--max-tasks", "1",
                                   "--max-candidates", "1", "--model-endpoint", server.base_url(),
                                   "--model-name", "scripted", "--model-rewrites", "1", "--env-store", store};
  testing::LoggedRun ran = testing::RunLogged(args, log);
  const std::string& output = ran.out;
  ASSERT_EQ(ran.status, 0) << output;
  ASSERT_NE(asked, nullptr) << output;
  EXPECT_EQ(server.turns().size(), 2u);  // one rewrite, one statement
  EXPECT_NE(output.find(" valid=1 "), std::string::npos) << output;
  EXPECT_NE(output.find("synth: sources: model rewrite tally/core.py:"), std::string::npos) << output;
  EXPECT_NE(output.find(" " + asked->name + ": generated (parses (ast.parse);"), std::string::npos) << output;
  EXPECT_NE(output.find("synth: sources: model-written rewrites: generated (1 candidates from 1 functions asked of 5 "
                        "(model scripted))"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find(": deterministic (model statement refused: leaks the fix: it contains the changed line `" +
                        asked->fixed_line + "`; reply: # " + asked->name),
            std::string::npos)
      << output;

  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(out)) {
    if (fs::exists(e.path() / "task.toml")) folders.push_back(e.path());
  }
  ASSERT_EQ(folders.size(), 1u);
  EXPECT_EQ(folders[0].filename().string(), "tally-001-rewrite");
  const std::string toml = ReadFileOrEmpty(folders[0] / "task.toml");
  EXPECT_NE(toml.find("source = \"model rewrite\"\nmutation_kind = \"rewrite\"\nfile = \"tally/core.py\"\n"
                      "statement = \"failing tests\"\n"),
            std::string::npos)
      << toml;
  EXPECT_EQ(ReadFileOrEmpty(folders[0] / "instruction.md").rfind("# Failing tests in tally\n", 0), 0u);
  const std::string shipped = ReadFileOrEmpty(folders[0] / "environment" / "repo" / "tally" / "core.py");
  EXPECT_NE(shipped.find(asked->rewrite), std::string::npos) << shipped;
  EXPECT_EQ(shipped.find(asked->fixed_line), std::string::npos) << shipped;
}

}  // namespace
}  // namespace flotilla::synth
