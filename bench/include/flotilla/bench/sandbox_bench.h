// `flotilla bench sandbox`: create -> first exec of /bin/true -> destroy with the default
// policy (every enforcer this host supports), sequential and concurrent; the same through
// `runc run` over an OCI bundle of the same image; the whole-process CLI figure; and how many
// idle sandboxes one node holds. Prints name=value lines on stdout, progress on stderr.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace flotilla::bench {

struct SandboxBenchOptions {
  int n = 200;                  // create->exec->destroy cycles per mode
  std::vector<int> concurrency = {2, 32};
  int cli_n = 50;               // whole-process runs of each CLI
  int idle_target = 2500;       // idle sandboxes to hold at once; 0 skips the density figure
  bool runc = true;             // measure runc side by side
  std::string state_dir;        // parent of the run's own fresh state dir (removed afterwards); empty: /var/tmp
  std::string flotilla_binary;  // for the CLI figure; empty: the `flotilla` next to this executable
};

// Runs every figure in order; the first failure ends the run with its status.
absl::Status RunSandboxBench(const SandboxBenchOptions& options);

// Registers `sandbox` (with --n, --cli-n, --idle, --no-runc, --state-dir) on `bench`.
void RegisterSandboxBench(CLI::App& bench, int* exit_code);

}  // namespace flotilla::bench
