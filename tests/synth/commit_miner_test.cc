// Unit tests of commit mining: unified diffs applied both ways, the git history walker on a
// repository made here with real git commands (which commits become candidates, and every
// skip's reason), the debian/patches reader, and a mined fix's round trip through its row.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "candidate_files.h"
#include "commit_miner.h"
#include "flotilla/common/text_files.h"
#include "gtest/gtest.h"
#include "task_writer.h"
#include "testing/temp_dir.h"
#include "unified_diff.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

ProjectProfile Python() {
  ProjectProfile p;
  p.language = "python";
  return p;
}

TEST(UnifiedDiffTest, ParsesSectionsAndAppliesBothWays) {
  const std::string patch =
      "Description: fix the bound\n"
      "--- a/pkg/core.py\n"
      "+++ b/pkg/core.py\n"
      "@@ -2,3 +2,3 @@ def f(x):\n"
      " a = 1\n"
      "-    return x < 10\n"
      "+    return x <= 10\n"
      " b = 2\n"
      "@@ -8,2 +8,3 @@\n"
      " y = 3\n"
      " z = 4\n"
      "+w = 5\n"
      "\\ No newline at end of file\n"
      "diff --git a/img.png b/img.png\n"
      "Binary files a/img.png and b/img.png differ\n"
      "-- \n"
      "2.39.2\n";
  std::vector<FileDiff> files = ParseUnifiedDiff(patch, 1);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path(), "pkg/core.py");
  EXPECT_EQ(files[0].added, 2);
  EXPECT_EQ(files[0].removed, 1);
  ASSERT_EQ(files[0].hunks.size(), 2u);
  EXPECT_EQ(files[0].hunks[1].new_lines.back(), "w = 5");
  EXPECT_FALSE(files[0].binary);
  EXPECT_EQ(files[1].path(), "img.png");
  EXPECT_TRUE(files[1].binary);

  // Two lines more at the top than the diff says: the hunks are found where they are.
  const std::string before = "#\n#\nhead\na = 1\n    return x < 10\nb = 2\nc\nd\ne\ny = 3\nz = 4\n";
  const std::string after = "#\n#\nhead\na = 1\n    return x <= 10\nb = 2\nc\nd\ne\ny = 3\nz = 4\nw = 5";
  auto fwd = ApplyFileDiff(before, files[0], false);
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  EXPECT_EQ(*fwd, after);
  auto back = ApplyFileDiff(after, files[0], true);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, before);
  auto bad = ApplyFileDiff("a = 1\n    return x < 11\nb = 2\n", files[0], true);
  EXPECT_EQ(bad.status().message(), "pkg/core.py: hunk 1 (line 2) does not match the file");
}

// Runs a shell command in `dir` with a fixed identity and dates; true on exit status 0.
bool Sh(const fs::path& dir, const std::string& cmd) {
  std::string full = absl::StrCat("cd '", dir.string(), "' && GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t ",
                                  "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent ",
                                  "sh -c '", cmd, "' >/dev/null 2>&1");
  return std::system(full.c_str()) == 0;
}

TEST(CommitMinerTest, WalksHistoryKeepingCommitsThatChangeCodeAndTests) {
  if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git not installed";
  testing::TempDir dir;
  fs::path r = dir.path() / "repo";
  fs::create_directories(r);
  auto commit = [&](const std::string& msg) { return Sh(r, "git add -A && git commit -q -m \"" + msg + "\""); };
  ASSERT_TRUE(Sh(r, "git init -q -b main ."));
  Write(r / "pkg/core.py", "def clamp(x):\n    return min(x, 9)\n\n\ndef twice(x):\n    return 2 * x\n");
  Write(r / "pkg/util.py", "def name():\n    return 'u'\n");
  Write(r / "tests/test_core.py", "from pkg.core import clamp\n\n\ndef test_low():\n    assert clamp(1) == 1\n");
  ASSERT_TRUE(commit("initial"));
  // A fix with its test: the candidate.
  Write(r / "pkg/core.py", "def clamp(x):\n    return min(x, 10)\n\n\ndef twice(x):\n    return 2 * x\n");
  Write(r / "tests/test_core.py", ReadFileOrEmpty(r / "tests/test_core.py") + "\n\ndef test_top():\n    assert clamp(10) == 10\n");
  ASSERT_TRUE(commit("clamp: allow 10"));
  // Code only, tests only, documentation only (on a side branch, merged).
  Write(r / "pkg/util.py", "def name():\n    return 'util'\n");
  ASSERT_TRUE(commit("util: longer name"));
  Write(r / "tests/test_util.py", "from pkg.util import name\n\n\ndef test_name():\n    assert name() == 'util'\n");
  ASSERT_TRUE(commit("test util"));
  ASSERT_TRUE(Sh(r, "git checkout -q -b side && echo docs > README && git add README && git commit -q -m readme"));
  ASSERT_TRUE(Sh(r, "git checkout -q main && git merge -q --no-ff -m \"Merge side\" side"));
  // A fix with a test whose lines a later commit changed again: it no longer reverts.
  Write(r / "pkg/core.py", "def clamp(x):\n    return min(x, 10)\n\n\ndef twice(x):\n    return x + x\n");
  Write(r / "tests/test_twice.py", "from pkg.core import twice\n\n\ndef test_twice():\n    assert twice(2) == 4\n");
  ASSERT_TRUE(commit("twice: add"));
  Write(r / "pkg/core.py", "def clamp(x):\n    return min(x, 10)\n\n\ndef twice(x):\n    return x * 2\n");
  ASSERT_TRUE(commit("twice: multiply"));

  auto mined = MineCommits(r.string(), Python(), MiningOptions{});
  ASSERT_TRUE(mined.ok()) << mined.status();
  EXPECT_EQ(mined->looked_at, 8);
  ASSERT_EQ(mined->fixes.size(), 1u);
  const MinedFix& fix = mined->fixes[0];
  EXPECT_EQ(fix.kind, "commit");
  EXPECT_EQ(fix.subject, "clamp: allow 10");
  EXPECT_EQ(fix.ref.size(), 40u);
  EXPECT_EQ(fix.source_files, std::vector<std::string>{"pkg/core.py"});
  EXPECT_EQ(fix.test_files, std::vector<std::string>{"tests/test_core.py"});
  EXPECT_EQ(fix.changed_lines, 2);
  EXPECT_EQ(fix.first_line, 1);
  // The current tree with the fix's code reverted (the later change to twice stays).
  EXPECT_EQ(fix.broken.at("pkg/core.py"), "def clamp(x):\n    return min(x, 9)\n\n\ndef twice(x):\n    return x * 2\n");

  std::map<std::string, std::string> reasons;
  for (const MiningSkip& s : mined->skips) reasons[s.subject] = s.reason;
  std::map<std::string, std::string> want = {
      {"initial", "root commit (no parent to compare with)"},
      {"util: longer name", "no test change"},
      {"test util", "no source change (1 files: tests/test_util.py)"},
      {"readme", "no source change (1 files: README)"},
      {"Merge side", "merge commit (2 parents)"},
      {"twice: add", "does not revert on the current tree: pkg/core.py: hunk 1 (line 3) does not match the file"},
      {"twice: multiply", "no test change"},
  };
  EXPECT_EQ(reasons, want);

  // --mine-commits bounds the walk to the newest commits.
  MiningOptions two;
  two.max_commits = 2;
  auto newest = MineCommits(r.string(), Python(), two);
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->looked_at, 2);
  EXPECT_TRUE(newest->fixes.empty());

  // A fix over the size limit is skipped with its size.
  MiningOptions small;
  small.max_changed_lines = 1;
  auto bounded = MineCommits(r.string(), Python(), small);
  ASSERT_TRUE(bounded.ok());
  EXPECT_TRUE(bounded->fixes.empty());
  reasons.clear();
  for (const MiningSkip& s : bounded->skips) reasons[s.subject] = s.reason;
  EXPECT_EQ(reasons.at("clamp: allow 10"), "too large: 2 changed lines in 1 source files (at most 1 in 8)");

  // The row stored in synth.db gives back the same files.
  CandidateRow row = MinedCandidate(fix);
  EXPECT_EQ(row.id, "commit-" + fix.ref.substr(0, 12));
  EXPECT_EQ(row.source, "commit-mining");
  auto change = CandidateFiles(row, r.string());
  ASSERT_TRUE(change.ok()) << change.status();
  ASSERT_EQ(change->files.size(), 1u);
  EXPECT_EQ(change->files[0].file, "pkg/core.py");
  EXPECT_EQ(change->files[0].fixed, ReadFileOrEmpty(r / "pkg/core.py"));
  EXPECT_EQ(change->files[0].broken, fix.broken.at("pkg/core.py"));
  EXPECT_EQ(change->ref, fix.ref);
  EXPECT_EQ(change->subject, "clamp: allow 10");

  EXPECT_EQ(MineCommits((dir.path() / "nowhere").string(), Python(), MiningOptions{}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CommitMinerTest, ReadsDebianPatchesAppliedInTheTree) {
  testing::TempDir dir;
  fs::path r = dir.path() / "pkg-1.0";
  // The tree as dpkg-source leaves it: every applied patch in place.
  Write(r / "pkg/core.py", "def clamp(x):\n    return min(x, 10)\n");
  Write(r / "tests/test_core.py", "def test_top():\n    assert True\n");
  Write(r / "debian/patches/fix-bound.patch",
        "Description: clamp allows 10\n Upstream says so.\nAuthor: t\n"
        "Index: pkg-1.0/pkg/core.py\n===================================================================\n"
        "--- pkg-1.0.orig/pkg/core.py\n+++ pkg-1.0/pkg/core.py\n@@ -1,2 +1,2 @@\n def clamp(x):\n"
        "-    return min(x, 9)\n+    return min(x, 10)\n"
        "--- pkg-1.0.orig/tests/test_core.py\n+++ pkg-1.0/tests/test_core.py\n@@ -1,2 +1,2 @@\n"
        " def test_top():\n-    pass\n+    assert True\n");
  Write(r / "debian/patches/skip-network.patch",
        "Subject: [PATCH] skip a network test\n---\n--- a/tests/test_core.py\n+++ b/tests/test_core.py\n"
        "@@ -1 +1 @@\n-def test_top():\n+def test_top():\n");
  Write(r / "debian/patches/later.patch", "Description: not applied\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
                                          "@@ -1 +1 @@\n-def clamp(x):\n+def clamp(y):\n");
  Write(r / "debian/patches/series",
        "# applied in this order\nfix-bound.patch\nskip-network.patch -p1\nmissing.patch\nlater.patch\n");
  Write(r / ".pc/applied-patches", "fix-bound.patch\nskip-network.patch\nmissing.patch\n");

  auto mined = MineDebianPatches(r.string(), Python(), MiningOptions{});
  ASSERT_TRUE(mined.ok()) << mined.status();
  EXPECT_EQ(mined->looked_at, 4);
  ASSERT_EQ(mined->fixes.size(), 1u);
  const MinedFix& fix = mined->fixes[0];
  EXPECT_EQ(fix.kind, "debian-patch");
  EXPECT_EQ(fix.ref, "fix-bound.patch");
  EXPECT_EQ(fix.subject, "clamp allows 10");
  EXPECT_EQ(fix.source_files, std::vector<std::string>{"pkg/core.py"});
  EXPECT_EQ(fix.test_files, std::vector<std::string>{"tests/test_core.py"});
  EXPECT_EQ(fix.broken.at("pkg/core.py"), "def clamp(x):\n    return min(x, 9)\n");
  std::map<std::string, std::string> reasons;
  for (const MiningSkip& s : mined->skips) reasons[s.ref] = s.reason;
  std::map<std::string, std::string> want = {
      {"skip-network.patch", "no source change (1 files: tests/test_core.py)"},
      {"missing.patch", "listed in the series but not in debian/patches"},
      {"later.patch", "not applied in the tree (not in .pc/applied-patches)"},
  };
  EXPECT_EQ(reasons, want);
  EXPECT_EQ(MinedCandidate(fix).id, "debian-patch-fix-bound.patch");

  // Without dpkg-source's record a patch counts as applied when it reverts.
  fs::remove_all(r / ".pc");
  auto guessed = MineDebianPatches(r.string(), Python(), MiningOptions{});
  ASSERT_TRUE(guessed.ok());
  ASSERT_EQ(guessed->fixes.size(), 1u);
  reasons.clear();
  for (const MiningSkip& s : guessed->skips) reasons[s.ref] = s.reason;
  EXPECT_EQ(reasons.at("later.patch"),
            "does not revert on the current tree: pkg/core.py: hunk 1 (line 1) does not match the file (no "
            ".pc/applied-patches: the patch may not be applied)");

  // A tree without a series has nothing to mine.
  auto none = MineDebianPatches((dir.path() / "nothing").string(), Python(), MiningOptions{});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->looked_at, 0);
}

// A mined fix over two files: both ship broken, the solution writes both back, task.toml keeps
// the origin, and the instruction names neither the subject nor the Debian revision.
TEST(CommitMinerTest, WritesEveryFileOfAMinedFix) {
  testing::TempDir d;
  Write(d.path() / "repo/pkg/a.py", "A = 2\n");
  Write(d.path() / "repo/pkg/b.py", "B = 2\n");
  Write(d.path() / "repo/tests/test_a.py", "def test_a(): pass\n");
  fs::create_directories(d.path() / "debs");
  ProjectProfile p = Python();
  p.test_files = {"tests/test_a.py"};
  TaskSpec s;
  s.name = "pkg-001-debian-patch";
  s.package = "pkg";
  s.version = "1.0-2+deb12u1";
  s.source = "commit-mining";
  s.kind = "debian-patch";
  s.file = "pkg/a.py";
  s.fixed_content = "A = 2\n";
  s.broken_content = "A = 1\n";
  s.other_files = {{"pkg/b.py", "B = 2\n", "B = 1\n"}};
  s.origin_ref = "0001-make-a-two.patch";
  s.origin_subject = "Make A two";
  s.fail_to_pass = {"tests/test_a.py::test_a"};
  s.debs_dir = (d.path() / "debs").string();
  ASSERT_TRUE(WriteTask((d.path() / "task").string(), (d.path() / "repo").string(), p, s).ok());
  EXPECT_EQ(ReadFileOrEmpty(d.path() / "task/environment/repo/pkg/a.py"), "A = 1\n");
  EXPECT_EQ(ReadFileOrEmpty(d.path() / "task/environment/repo/pkg/b.py"), "B = 1\n");
  EXPECT_EQ(ReadFileOrEmpty(d.path() / "task/solution/solve.sh"),
            "#!/bin/bash\n# The fix: pkg/a.py and the other changed files as it was before the bug.\nset -e\n"
            "cat > /app/pkg/a.py <<'FLOTILLA_SYNTH_FIX'\nA = 2\nFLOTILLA_SYNTH_FIX\n"
            "cat > /app/pkg/b.py <<'FLOTILLA_SYNTH_FIX'\nB = 2\nFLOTILLA_SYNTH_FIX\n");
  std::string toml = ReadFileOrEmpty(d.path() / "task/task.toml");
  EXPECT_NE(toml.find("source = \"commit-mining\"\nmutation_kind = \"debian-patch\"\nfile = \"pkg/a.py\"\n"
                      "files = [\"pkg/a.py\", \"pkg/b.py\"]\norigin_ref = \"0001-make-a-two.patch\"\n"
                      "origin_subject = \"Make A two\"\n"),
            std::string::npos)
      << toml;
  std::string instruction = ReadFileOrEmpty(d.path() / "task/instruction.md");
  EXPECT_NE(instruction.find("The repository in `/app` is pkg 1.0 (Python). The code does not yet behave as its "
                             "tests expect: 1 test fails.\n"),
            std::string::npos)
      << instruction;
  EXPECT_EQ(instruction.find("two"), std::string::npos) << instruction;
  EXPECT_EQ(instruction.find("deb12u1"), std::string::npos) << instruction;
}

// A Latin-1 patch description reaches synth.db with the odd byte replaced, not as an error.
TEST(CommitMinerTest, KeepsASubjectInAnotherEncoding) {
  testing::TempDir d;
  Write(d.path() / "pkg/a.py", "A = 2\n");
  MinedFix fix;
  fix.kind = "debian-patch";
  fix.ref = "upstream/caf.patch";
  fix.subject = "caf\xe9 fix";
  fix.source_files = {"pkg/a.py"};
  fix.broken["pkg/a.py"] = "A = 1\n";
  CandidateRow row = MinedCandidate(fix);
  EXPECT_EQ(row.id, "debian-patch-upstream_caf.patch");
  auto change = CandidateFiles(row, d.path().string());
  ASSERT_TRUE(change.ok()) << change.status();
  EXPECT_EQ(change->subject, "caf\xef\xbf\xbd fix");
  EXPECT_EQ(change->files[0].broken, "A = 1\n");
  row.replacement = "{}";
  EXPECT_EQ(CandidateFiles(row, d.path().string()).status().code(), absl::StatusCode::kDataLoss);
}

TEST(CommitMinerTest, ClassifiesTestAndSourcePaths) {
  EXPECT_TRUE(IsTestPath("python", "tests/test_a.py"));
  EXPECT_TRUE(IsTestPath("python", "pkg/conftest.py"));
  EXPECT_TRUE(IsTestPath("python", "pkg/a_test.py"));
  EXPECT_FALSE(IsTestPath("python", "pkg/contest.py"));
  EXPECT_TRUE(IsSourcePath("python", "pkg/a.py"));
  EXPECT_FALSE(IsSourcePath("python", "setup.py"));
  EXPECT_FALSE(IsSourcePath("python", "README"));
  EXPECT_FALSE(IsSourcePath("python", "docs/conf.py"));
  EXPECT_TRUE(IsSourcePath("python", "version.py"));
  EXPECT_TRUE(IsTestPath("c", "tests/t1.c"));
  EXPECT_TRUE(IsTestPath("c", "src/test-md5.c"));
  EXPECT_TRUE(IsSourcePath("c", "src/md5.h"));
  EXPECT_FALSE(IsSourcePath("c", "tests/t1.c"));
}

}  // namespace
}  // namespace flotilla::synth
