// `flotilla bench engine`: decode and 4k-context prefill throughput of the CPU engine against
// PyTorch eager in the same run, the prefix cache's prefill ratio over a 20-turn agent session
// re-sent as full histories, resume against re-prefill at a 4k context, the first-request
// prefill of a tiny real-vocabulary Qwen3-MoE, and (with a CUDA device) GPU decode throughput
// against the HBM roofline. Prints name=value lines.
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
  int prefill_context = 4000;  // engine.cpu_prefill_vs_torch
  int session_turns = 20;      // engine.prefix_prefill_ratio
  std::string source_dir;  // for the PyTorch script; empty: $FLOTILLA_SOURCE_DIR or "."
};

// Returns 0 on success.
int RunEngineBench(const EngineBenchOptions& options);

}  // namespace flotilla::bench
