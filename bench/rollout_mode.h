// What `flotilla bench rollout` shares between its sync-vs-async comparison (rollout_bench.cc)
// and its observability-cost comparison (metrics_overhead.cc): one mode's run on an engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/app/embedded_platform.h"
#include "flotilla/common/metrics.h"
#include "flotilla/inference/engine.h"
#include "flotilla/inference/model_config.h"
#include "flotilla/worker/sandbox_client.h"
#include "rollout_bench.h"

namespace flotilla::bench {

struct ModeResult {
  double seconds = 0;
  double trainer_busy_s = 0;
  double stall_ms_mean = 0;
  double stall_ms_max = 0;
  double stage_ms_mean = 0;
  uint64_t tokens = 0;           // generated, whether a step consumed them or not
  uint64_t consumed_tokens = 0;  // generated tokens of the groups the trainer took
  uint64_t prefill_on_resume = 0;
  uint64_t samples = 0;
  uint64_t sandboxes = 0;
  double sandbox_ms = 0;          // create + destroy, summed over samples
  double sandbox_create_ms = 0;   // ... the creates' share
  double sandbox_release_ms = 0;  // destroys after the samples ended (off their path), summed
  double episode_ms = 0;          // wall time of the samples that had a sandbox, summed
  uint64_t failed = 0;            // samples that ended failed (a full cluster)
  uint64_t cancelled = 0;         // samples in flight when the mode stopped (interrupted)
  uint64_t reused = 0;            // samples' sandboxes handed from the node's warm pool
  double host_busy_cores = 0;     // the host's busy CPU time (/proc/stat) over the mode's wall time
  std::vector<double> step_s;     // wall time of each trainer step, batch wait included
};

// `o.steps` training steps at staleness `eta` against a stand-in trainer that takes `train_s`
// per step, every sample a worker episode in a sandbox from `sandboxes`; the episodes' worker
// figures go to `metrics` (null: not counted).
absl::StatusOr<ModeResult> RunMode(const RolloutBenchOptions& o, inference::Engine& engine, worker::SandboxClient& sandboxes,
                   const std::string& weights, uint32_t eta, double train_s, MetricsRegistry* metrics = nullptr);

// --metrics-overhead: the asynchronous mode without and with observability, interleaved
// (metrics_overhead.cc); returns the process exit code.
int RunMetricsOverhead(const RolloutBenchOptions& o, const app::PlatformOptions& po,
                       const inference::ModelConfig& model, const std::string& weights, double train_s);

}  // namespace flotilla::bench
