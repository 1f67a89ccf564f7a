// Commit mining (R2E-Gym style): real fixes of a project become task candidates.
//
// Two supplies, both read on the host:
//   git history   the last `max_commits` commits of a repository with .git. A commit that is
//                 not a merge and changes the language's source files and its test files is a
//                 fix; its source-file diff, reverted on the current tree, gives the broken
//                 state. The tree's tests (which hold the commit's new or changed tests) stay.
//   debian/patches  a Debian source package's quilt series. `apt-get source` (dpkg-source -x)
//                 unpacks a 3.0 (quilt) package with every patch applied and lists them in
//                 .pc/applied-patches; without that list a patch counts as applied when it
//                 reverts cleanly. An applied patch that changes source files is a fix: its
//                 source hunks, reverted on the tree, give the broken state; its test hunks
//                 (if any) stay applied. Test changes are not required of a patch (few carry
//                 them): validation decides whether some test catches the revert.
// Every commit or patch that is not a candidate gets its reason: merge commit, root commit, no
// source change, no test change, binary, adds or removes a source file, too large, does not
// revert on the current tree, ...
//
// The environment is the current tree, so the broken state is "the current tree without this
// fix": for the newest commits that is the commit's parent with the commit's tests; a fix that
// later commits built on does not revert and is skipped.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "project_profile.h"

namespace flotilla::synth {

struct MiningOptions {
  int max_commits = 200;         // newest commits looked at (0: no commit mining)
  int max_changed_lines = 300;   // source lines added plus removed
  int max_source_files = 8;
};

struct MinedFix {
  std::string kind;     // "commit" or "debian-patch"
  std::string ref;      // the commit's hash, or the patch's name in the series
  std::string subject;  // the commit's subject, or the patch's Description/Subject first line
  std::vector<std::string> source_files;  // reverted (sorted)
  std::vector<std::string> test_files;    // changed by the fix, kept as the tree has them
  std::map<std::string, std::string> broken;  // source file -> its content with the fix reverted
  int changed_lines = 0;
  int first_line = 0;  // first changed line of the first source file (current tree)
};

struct MiningSkip {
  std::string kind;
  std::string ref;
  std::string subject;
  std::string reason;
};

struct MiningResult {
  std::vector<MinedFix> fixes;
  std::vector<MiningSkip> skips;
  int looked_at = 0;  // commits or patches examined
};

// Files of the profile's language: tests (test_*.py, *_test.py, conftest.py, or under a
// tests/test/testing folder; C: under tests/test/t/testsuite, or named test*) and sources
// (.py, or .c/.h, that are not tests; not setup.py; not under doc/, docs/, examples/, bench/,
// benchmarks/ or contrib/).
bool IsTestPath(const std::string& language, const std::string& path);
bool IsSourcePath(const std::string& language, const std::string& path);

// The git history of `repo` (a folder with .git). FailedPrecondition when git cannot read it.
absl::StatusOr<MiningResult> MineCommits(const std::string& repo, const ProjectProfile& p, const MiningOptions& o);

// debian/patches/series of `repo`; an empty result when the tree has no series file.
// InvalidArgument naming the file for an unreadable series.
absl::StatusOr<MiningResult> MineDebianPatches(const std::string& repo, const ProjectProfile& p,
                                               const MiningOptions& o);

}  // namespace flotilla::synth
