// The command-line flags of the rollout benchmark, shared by `flotilla bench rollout` and the
// standalone `flotilla_rollout_bench` binary (for machines without the CLI's libraries).
#pragma once

#include "CLI/CLI.hpp"
#include "rollout_bench.h"

namespace flotilla::bench {

inline void AddRolloutBenchFlags(CLI::App* app, RolloutBenchOptions* o) {
  app->add_option("--steps", o->steps, "training steps per mode")->capture_default_str();
  app->add_option("--prompts-per-step", o->prompts_per_step, "groups per training step")->capture_default_str();
  app->add_option("--group-size", o->group_size, "samples per group")->capture_default_str();
  app->add_option("--median", o->median, "median response length (lognormal)")->capture_default_str();
  app->add_option("--sigma", o->sigma, "lognormal sigma")->capture_default_str();
  app->add_option("--cap", o->cap, "length cap")->capture_default_str();
  app->add_option("--eta", o->eta, "staleness bound of the async mode")->capture_default_str();
  app->add_option("--backend", o->backend, "engine backend: cpu (tiny model) or cuda (GpuBenchModel)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app->add_option("--threads", o->threads, "engine threads (0: all cores)")->capture_default_str();
  app->add_option("--seed", o->seed, "workload seed")->capture_default_str();
  app->add_flag("--metrics-overhead", o->metrics_overhead,
                "measure what metrics and the dashboard cost (async mode without and with them)");
  app->add_option("--overhead-rounds", o->overhead_rounds, "pairs of runs for --metrics-overhead")
      ->capture_default_str();
  app->add_option("--work-dir", o->work_dir, "where the model files go (default: a temp dir, removed)");
}

}  // namespace flotilla::bench
