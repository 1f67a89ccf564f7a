// Probes of a written task in its own built environment: the oracle must score 1; doing
// nothing, deleting the tests, editing the tests, replacing the test runner and (C) shadowing
// the Makefile with a GNUmakefile must score 0;
// no line unique to the fix may be findable (files, git objects, reflog, stash, tags, .orig,
// .rej, bytecode).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/worker/sandbox_client.h"
#include "project_profile.h"
#include "task_writer.h"

namespace flotilla::synth {

struct ProbeResult {
  std::string name;   // oracle, nop, delete-tests, edit-tests, replace-runner, shadow-makefile, leak
  double reward = 0;  // the verifier's reward (leak: 1 when something leaked)
  bool ok = false;    // the probe came out as a sound task needs
  std::string detail;
};

// Runs every probe (each in a fresh sandbox from `sandboxes`); stops at the first that fails.
// `task_dir` is the written folder, `top`
// its built environment, `unique_fix_lines` the fixed file's lines found nowhere in the
// broken tree.
absl::StatusOr<std::vector<ProbeResult>> ProbeTask(worker::SandboxClient& sandboxes, const std::string& top,
                                                   const std::string& task_dir, const ProjectProfile& p,
                                                   const TaskSpec& spec,
                                                   const std::vector<std::string>& unique_fix_lines,
                                                   uint32_t timeout_ms);

}  // namespace flotilla::synth
