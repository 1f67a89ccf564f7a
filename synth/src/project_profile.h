// ProjectProfile: what a source tree is (language, test runner) and how to build, test and
// package it, decided by looking at its files. Every choice carries its reason.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::synth {

struct ProjectProfile {
  std::string language;  // "python" or "c"
  std::string runner;    // "pytest", "automake" (make check with the parallel harness), "make-check"
  std::vector<std::string> reasons;       // why this language and runner, one line each
  std::vector<std::string> packages;      // Debian packages the environment installs
  std::string build_script;               // run once in the environment's Dockerfile ("" none)
  std::string test_script;                // runs the whole suite from /app; prints per-test lines
  std::vector<std::string> source_files;  // files mutations may touch (relative)
  std::vector<std::string> test_files;    // test and harness files the verifier restores
};

// Looks at `repo_dir`; FailedPrecondition naming the folder and what is missing when no
// supported language with a test suite is found.
absl::StatusOr<ProjectProfile> DetectProject(const std::string& repo_dir);

// The package names of debian/control's Build-Depends, Build-Depends-Indep and
// Build-Depends-Arch (first alternative, no versions or qualifiers), in order; none when the
// tree has no debian/control.
std::vector<std::string> DebianBuildDepends(const std::string& repo_dir);

// The environment's Dockerfile: Debian packages only, the repository copied to /app.
std::string ProjectDockerfile(const ProjectProfile& p, bool with_git_base);

}  // namespace flotilla::synth
