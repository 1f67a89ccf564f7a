// `flotilla bench engine`: decode throughput of the CPU engine against PyTorch eager, resume
// against re-prefill at a 4k context, and (with a CUDA device) GPU decode throughput against
// the HBM roofline. Prints name=value lines.
#pragma once

#include <string>

namespace flotilla::bench {

struct EngineBenchOptions {
  bool cpu = true;
  bool gpu = true;
  bool gpu_forward_only = false;  // only the backend's forward at batch 256 (for profilers)
  int cpu_threads = 2;
  int new_tokens = 64;
  int resume_context = 4000;
  std::string source_dir;  // for the PyTorch script; empty: $FLOTILLA_SOURCE_DIR or "."
};

// Returns 0 on success.
int RunEngineBench(const EngineBenchOptions& options);

}  // namespace flotilla::bench
