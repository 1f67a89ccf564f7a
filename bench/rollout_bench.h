// `flotilla bench rollout`: the rollout controller and runner on the real engine with a
// long-tail workload, asynchronous sample-level dispatch (eta = 4) against synchronous batch
// rollout (eta = 0: every group of a step finishes before the weights update), same seeds and
// the same per-sample lengths. The trainer is a stand-in that takes one batch, spends as long
// as generating one median-length group took (calibrated on the idle engine), then publishes
// new weights through a real checkpoint switch.
//
// Prints name=value lines: rollout.async_vs_sync, rollout.trainer_idle_fraction.{async,sync},
// rollout.switch_stall_ms, and the raw timings.
#pragma once

#include <cstdint>
#include <string>

namespace flotilla::bench {

struct RolloutBenchOptions {
  uint32_t steps = 4;             // training steps per mode
  uint32_t prompts_per_step = 64;
  uint32_t group_size = 8;
  double median = 256;            // lognormal response lengths
  double sigma = 1.0;
  uint32_t cap = 4096;
  uint32_t eta = 4;
  int threads = 0;                // engine threads; 0: all cores
  uint64_t seed = 1;
  std::string work_dir;           // model files; empty: a temp dir
};

// Runs the benchmark; returns the process exit code.
int RunRolloutBench(const RolloutBenchOptions& options);

}  // namespace flotilla::bench
