// The web dashboard of `flotilla up`, `run` and `eval`: live curves from the run's metrics log,
// the fleet (scale units -> nodes -> sandboxes), a token-level trajectory viewer and eval job
// reports. Its page, script and style are compiled into the binary: nothing is fetched from
// any other host.
//
// Routes (GET):
//   /                         the page
//   /dashboard/app.js, .css   its assets
//   /metrics                  Prometheus text of `metrics` (404 where there is none)
//   /api/metrics_log          the run's metrics log as a JSON array (one object per step)
//   /api/fleet                the fleet view's JSON (see FleetView)
//   /api/trajectories         {"trajectories":[summary...]} newest first, ?limit=N (<= 1000)
//   /api/trajectories/ID      one trajectory (protobuf JSON of flotilla.v1.Trajectory), each
//                             token span with "token_text" when a decoder is given
//   /api/eval_jobs            [{"job":..., "result":{...}}] from `eval_jobs_dir`/*/result.json
// Everything else goes to `next` (the wire APIs), or 404 when there is none.
//
// Thread-safety: the handler runs on the HTTP server's connection threads; every source must
// be safe to call concurrently. Sources that are empty make their view say "not available".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/common/http_server.h"
#include "flotilla/common/metrics.h"
#include "flotilla/proto/trajectory.pb.h"

namespace flotilla::dashboard {

// Sandboxes of the fleet, as the scheduler and node agents report them.
struct FleetSandbox {
  std::string id;
  std::string state;   // "running", "starting", "stopped", ...
  std::string klass;   // execution class: "latency-sensitive", "best-effort"
};
struct FleetNode {
  std::string id;
  bool alive = true;              // false: its heartbeats stopped
  uint32_t slots_capacity = 0;    // as the node last reported
  std::vector<FleetSandbox> sandboxes;  // empty for an idle node
};
struct FleetUnit {
  std::string id;
  std::vector<FleetNode> nodes;
};

struct DashboardSources {
  const MetricsRegistry* metrics = nullptr;
  std::string metrics_log_path;
  std::function<absl::StatusOr<std::vector<v1::Trajectory>>(int limit)> recent_trajectories;
  std::function<absl::StatusOr<v1::Trajectory>(const std::string& id)> trajectory;
  std::function<absl::StatusOr<std::vector<FleetUnit>>()> fleet;
  std::function<std::string(int32_t token_id)> token_text;
  std::string eval_jobs_dir;
};

HttpHandler DashboardHandler(DashboardSources sources, HttpHandler next = nullptr);

}  // namespace flotilla::dashboard
