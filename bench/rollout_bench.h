// `flotilla bench rollout`: the rollout controller and runner on the real engine with a
// long-tail workload, asynchronous sample-level dispatch (eta = 4) against synchronous batch
// rollout (eta = 0: every group of a step finishes before the weights update), same seeds and
// the same per-sample lengths. The trainer is a stand-in that takes one batch, spends as long
// as generating one median-length group took (calibrated on the idle engine), then publishes
// new weights through a real checkpoint switch. The model is random-initialised and written to
// safetensors (bf16) by the benchmark itself.
//
// Every sample runs the one RL path: a worker episode (single-turn scaffold, the engine reached
// through the worker's ChatService) in its own sandbox from the embedded scheduler's front door,
// with the task's tests run in it.
//
// Prints name=value lines: rollout.async_vs_sync (the rate of the work the trainer got, the
// generated tokens of the groups it took per second, async over sync: the modes take the same
// steps but not the same tokens; rollout.async_vs_sync_seconds is the plain ratio of the two
// modes' seconds), rollout.trainer_idle_fraction.{async,sync},
// rollout.async_vs_sync_bound (the most async can gain over sync on this engine and workload:
// the synchronous tail and the trainer's step priced with the decode step measured at one row
// and at a step's whole batch, rollout.engine_step_ms_{1row,full}),
// rollout.switch_stall_ms (with rollout.weight_load_ms, the part of it spent reading the new
// weights), rollout.sandbox_overhead_frac (what acquiring and releasing the samples' sandboxes
// took, create + destroy or a warm-pool hand-over and give-back, over the samples' wall time),
// rollout.sandboxes_reused (creates the node answered from its warm pool), rollout.node.* (the
// node runtime's per-phase timings: mean ms and runs), and the raw timings.
// The node's admission is sized for the in-flight bound (prompts_per_step x group_size).
//
// With metrics_overhead it instead runs the asynchronous mode alternately without observability
// (no service records a figure, no HTTP server) and with all of it (every service's figures,
// the worker's HTTP server with the dashboard, /metrics scraped every second and the
// dashboard's API read every five, as its page does), and prints per-round figures with their
// median and range: rollout.metrics_overhead_frac (the share of tokens/s lost),
// rollout.metrics_cpu_overhead_frac (the extra process CPU per token) and
// rollout.metrics_attributed_cpu_frac (the requests' own CPU over the run's; metrics_overhead.cc).
#pragma once

#include <cstdint>
#include <string>

#include "flotilla/inference/model_config.h"

namespace flotilla::bench {

struct RolloutBenchOptions {
  uint32_t steps = 4;             // training steps per mode
  uint32_t prompts_per_step = 64;
  uint32_t group_size = 8;
  double median = 256;            // lognormal response lengths
  double sigma = 1.0;
  uint32_t cap = 4096;
  uint32_t eta = 4;
  std::string backend = "cpu";    // engine backend: "cpu" (a tiny model) or "cuda" (GpuModel())
  int threads = 0;                // engine threads; 0: all cores
  uint64_t seed = 1;
  std::string work_dir;           // model files; empty: a temp dir
  bool metrics_overhead = false;  // measure observability's cost instead of sync vs async
  uint32_t overhead_rounds = 2;   // rounds of (without, with) pairs, order alternating
};

// The model of the CUDA runs: large enough that a decode step costs about the same at batch 1
// and at batch 512 on an H200 (weight reads and launches, not rows, set its cost).
inference::ModelConfig GpuBenchModel();

// Runs the benchmark; returns the process exit code.
int RunRolloutBench(const RolloutBenchOptions& options);

}  // namespace flotilla::bench
