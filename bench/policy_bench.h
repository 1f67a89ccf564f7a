// Per-sandbox cost of each policy enforcer: what the runtime pays on create and destroy.
#pragma once

#include <ostream>

namespace flotilla::bench {

// Runs every measurement `n` times and prints name=value lines (microseconds) to `out`.
// Needs root for the eBPF and seccomp parts; prints "<name>=skipped (<reason>)" otherwise.
// Returns a process exit code.
int RunPolicyBench(int n, std::ostream& out);

}  // namespace flotilla::bench
