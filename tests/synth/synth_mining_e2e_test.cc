// `flotilla synth` mining a git history end to end: a small Python project whose history holds
// a root commit, a fix of `mean` that adds the test catching it, and a documentation commit.
// The fix becomes the one valid task (the synthesizer's probes in the task's own environment:
// oracle 1; nop, test deletion and edits, a replaced runner 0; no fix line findable);
// `flotilla eval` scores its oracle 1; the environment is a fresh tree with no history, and the
// commit's subject is kept in task.toml's provenance, never in the instruction. Needs root and
// the environment store's base image; skips visibly otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/common/text_files.h"
#include "gtest/gtest.h"
#include "testing/env.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

using testing::Env;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// The command's output (stderr too) and exit status.
std::string Sh(const std::string& cmd, int* status) {
  int st = 0;
  std::string out = testing::RunShell(cmd + " 2>&1", &st);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(SynthMiningE2eTest, FixCommitWithItsTestBecomesAValidTask) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (sandboxes, environment builds)";
  if (::access("/usr/sbin/debootstrap", X_OK) != 0) GTEST_SKIP() << "debootstrap not installed";
  if (!fs::exists("/etc/debian_version")) GTEST_SKIP() << "host is not Debian: no apt mirror for the environments";
  int st = 0;
  Sh("git --version", &st);
  if (st != 0) GTEST_SKIP() << "git not installed";
  const std::string bin = Env("FLOTILLA_BINARY_DIR", "build") + "/cli/flotilla";
  const std::string store = Env("FLOTILLA_ENV_STORE", "/var/lib/flotilla");
  testing::TempDir dir;
  fs::path repo = dir.path() / "repo";
  const std::string git = absl::StrCat("cd ", repo.string(), " && GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t ",
                                       "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t GIT_CONFIG_NOSYSTEM=1 HOME=" + dir.path().string() + " git ");
  Write(repo / "stats/__init__.py", "");
  Write(repo / "stats/core.py", "def mean(xs):\n    return sum(xs) // len(xs)\n\n\ndef span(xs):\n    return max(xs) - min(xs)\n");
  const std::string tests =
      "from stats.core import mean, span\n\n\ndef test_mean_whole():\n    assert mean([2, 4]) == 3\n\n\n"
      "def test_span():\n    assert span([1, 5, 3]) == 4\n";
  Write(repo / "tests/test_core.py", tests);
  Sh(git + "init -q -b main . && " + git + "add -A && " + git + "commit -q -m initial", &st);
  ASSERT_EQ(st, 0);
  Write(repo / "stats/core.py", "def mean(xs):\n    return sum(xs) / len(xs)\n\n\ndef span(xs):\n    return max(xs) - min(xs)\n");
  Write(repo / "tests/test_core.py", tests + "\n\ndef test_mean_fraction():\n    assert mean([1, 2]) == 1.5\n");
  Sh(git + "add -A && " + git + "commit -q -m 'mean: use true division'", &st);
  ASSERT_EQ(st, 0);
  std::string fix = Sh(git + "rev-parse HEAD", &st);
  fix = fix.substr(0, fix.find('\n'));
  ASSERT_EQ(fix.size(), 40u);
  Write(repo / "README", "stats\n");
  Sh(git + "add -A && " + git + "commit -q -m docs", &st);
  ASSERT_EQ(st, 0);

  const std::string out = dir.file("tasks");
  std::string s = Sh(absl::StrCat(bin, " synth --repo ", repo.string(), " --out ", out,
                                   " --package mined --version 1.0 --max-tasks 1 --max-candidates 1 --env-store ", store),
                      &st);
  ASSERT_EQ(st, 0) << s;
  EXPECT_NE(s.find("synth: sources: commit mining: generated (1 candidates from 3 examined; skipped: 1 no source "
                   "change, 1 root commit)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("synth: probe: commit-" + fix.substr(0, 12) +
                   ": valid (mined-001-commit: oracle 1; nop, delete-tests, edit-tests, replace-runner 0; no leak"),
            std::string::npos)
      << s;
  fs::path task = fs::path(out) / "mined-001-commit";
  std::string toml = ReadFileOrEmpty(task / "task.toml");
  EXPECT_NE(toml.find("source = \"commit-mining\"\nmutation_kind = \"commit\"\nfile = \"stats/core.py\"\n"
                      "files = [\"stats/core.py\"]\norigin_ref = \"" + fix +
                      "\"\norigin_subject = \"mean: use true division\"\n"),
            std::string::npos)
      << toml;
  EXPECT_NE(toml.find("fail_to_pass = [\"tests/test_core.py::test_mean_fraction\"]\npass_to_pass = "
                      "[\"tests/test_core.py::test_mean_whole\", \"tests/test_core.py::test_span\"]\n"),
            std::string::npos)
      << toml;
  // The subject names the fix: the instruction has only the failing test and its message.
  std::string instruction = ReadFileOrEmpty(task / "instruction.md");
  EXPECT_EQ(instruction.find("division"), std::string::npos) << instruction;
  EXPECT_NE(instruction.find("- `tests/test_core.py::test_mean_fraction`: assert 1 == 1.5\n"), std::string::npos)
      << instruction;
  // The environment is the tree without the fix and without history; the new test is hidden.
  EXPECT_FALSE(fs::exists(task / "environment" / "repo" / ".git"));
  EXPECT_NE(ReadFileOrEmpty(task / "environment" / "repo" / "stats" / "core.py").find("sum(xs) // len(xs)"), std::string::npos);
  EXPECT_NE(ReadFileOrEmpty(task / "tests" / "hidden" / "tests" / "test_core.py").find("def test_mean_fraction"),
            std::string::npos);

  // `flotilla eval` runs the folder unchanged (nop's 0 is the probe's, asserted above).
  std::string ev = Sh(absl::StrCat(bin, " eval --tasks ", out, " --state-dir ", dir.file("state"),
                                   " --harness mini --agent oracle --env-store ", store),
                      &st);
  ASSERT_EQ(st, 0) << ev;
  EXPECT_NE(ev.find("eval: harness=mini tasks=1 passed=1 pass_rate=1.000"), std::string::npos) << ev;
}

}  // namespace
}  // namespace flotilla::synth
