// `flotilla bench soak`: a bounded churn of what a node and a worker do all day, then a check
// that it left nothing behind. Sandbox threads loop create -> exec /bin/true -> destroy (the
// default policy, start-ahead on, as `flotilla node` runs it); session threads loop chat
// completions against an embedded worker (the default random-init model on the CPU engine)
// over HTTP, every fourth streamed and every eighth streamed and dropped after its first event;
// each request is a session of its own, closed afterwards as a scaffold closes an episode.
//
// After a warm-up the load pauses (every loop between two operations, nothing in flight) and
// these are taken once they have settled: the process's open fds; the mounts of its own mount
// namespace (made private at the start, so other processes' mounts do not count); the cgroups
// under the soak's own prefix; the BPF links it holds or attached under that prefix; the KV
// pages the engine's sequences reference; its resident memory. The load then runs for
// `seconds`, pauses the same way, and they are taken again:
//   soak.leaked_fds, soak.leaked_mounts, soak.leaked_cgroups, soak.leaked_bpf_links,
//   soak.leaked_kv_pages   (end - baseline; 0 expected)
//   soak.rss_growth_frac  (RSS at the end / RSS after warm-up - 1; <= 0.05 expected)
// and after the runtime has closed, soak.cgroups_after_close (0 expected: its prefix is gone).
// Prints name=value lines on stdout; a cycle or request that fails ends the run with its error.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace flotilla::bench {

struct SoakBenchOptions {
  int seconds = 120;          // measured load, after the warm-up
  int warmup_seconds = 15;
  int sandbox_threads = 8;    // concurrent create -> exec -> destroy loops
  int session_threads = 4;    // concurrent chat-completion clients
  int max_tokens = 8;         // per completion
  std::string state_dir;      // parent of the run's own fresh state dir; empty: /var/tmp
};

absl::Status RunSoakBench(const SoakBenchOptions& options);

// Registers `soak` on `bench`.
void RegisterSoakBench(CLI::App& bench, int* exit_code);

}  // namespace flotilla::bench
