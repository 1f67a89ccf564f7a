// TaskWriter: one synthesized bug written out as a Harbor-format task folder.
//
//   <name>/instruction.md        the problem statement (failing tests and their messages)
//   <name>/task.toml             timeouts and [synth] provenance
//   <name>/environment/          Dockerfile + repo/ (the broken tree; a one-commit repository
//                                is made from it while building) + debs/ (Debian packages)
//   <name>/tests/test.sh         the verifier (writes /logs/verifier/reward.txt)
//   <name>/tests/hidden/...      the repository's tests and harness files, restored by test.sh
//   <name>/tests/*.txt|*.sha256  expected tests, hashes of the hidden files and of the runner
//   <name>/solution/solve.sh     writes the fixed file back
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "project_profile.h"

namespace flotilla::synth {

struct TaskSpec {
  std::string name;
  std::string package;
  std::string version;
  std::string base_hash;        // sha256 of the broken file set's listing (see synthesizer.cc)
  std::string source;           // "mutation" or "commit-mining"
  std::string kind;             // mutation kind
  std::string file;             // the file the fix touches
  std::string fixed_content;    // its content after the fix (the original)
  std::string broken_content;   // and as the task ships it
  // Further files the fix touches (a mined fix may change several): shipped broken, written
  // back fixed by the solution.
  struct OtherFile {
    std::string file, fixed_content, broken_content;
  };
  std::vector<OtherFile> other_files;
  std::string origin_ref;       // commit mining: the commit's hash or the Debian patch's name
  std::string origin_subject;   // its subject line: provenance in task.toml, never in instruction.md
  std::vector<std::string> fail_to_pass;
  std::vector<std::string> pass_to_pass;
  std::map<std::string, std::string> messages;  // failing test -> message
  std::string statement;        // a model's problem statement (statement_writer.h); "": the deterministic one
  std::string hidden_sha256;    // `sha256sum` lines of the hidden files (paths relative to /app)
  std::string runner_sha256;    // fingerprint of the runner (RunnerFingerprintScript's output)
  std::string base_files;       // the tree's Python files at the base, one a line (python only)
  std::map<std::string, double> timings;
  std::string debs_dir;         // the environment's .debs (deb_cache.h), linked into environment/debs/
  // The test files as the built base environment has them (a build may regenerate some, e.g.
  // automake's Makefile.in): tests/hidden/ is copied from here, so the hashes match. Empty: from
  // the repository.
  std::string hidden_dir;
};

// A shell command printing one hash of the packages' files (dpkg -V), Python startup hooks
// (*.pth, sitecustomize, usercustomize) and /usr/local: what a replaced runner changes.
std::string RunnerFingerprintScript();

// The verifier's first step for a C project: removes under `root` (/app), outside .git, what
// a build reads from earlier runs (GNUmakefile/makefile shadowing Makefile, objects,
// libraries, .deps fragments, test logs), so the agent's only way into the result is the source.
std::string CleanBuildStateScript(const std::string& root);

// The verifier's check of a runner's log: prints the expected tests that did not pass.
std::string MissingPassesScript(const ProjectProfile& p, const std::string& log, const std::string& expected);

// The problem statement: names the failing tests and their messages, never the change.
std::string ProblemStatement(const TaskSpec& spec, const ProjectProfile& p);

// Copies a source tree without .git, __pycache__, bytecode, .orig/.rej, and (at the top)
// debian/ and .pc/ (packaging, quilt's copies of the unpatched files).
absl::Status CopyRepoTree(const std::string& from, const std::string& to);

// Writes the folder `dir` (created; an existing one is replaced). `repo_dir` is the original
// tree: copied to environment/repo/ with the task's file broken; its test files go to
// tests/hidden/ (from spec.hidden_dir when set).
absl::Status WriteTask(const std::string& dir, const std::string& repo_dir, const ProjectProfile& p,
                       const TaskSpec& spec);

}  // namespace flotilla::synth
