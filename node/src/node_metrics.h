// The node agent's Prometheus families (private to the node component):
//
//   flotilla_node_sandboxes_created_total{class}           sandboxes created
//   flotilla_node_sandboxes_destroyed_total{class}         sandboxes destroyed
//   flotilla_node_sandboxes_reused_total{class}            creates handed a reset sandbox of the
//                                                          warm pool (counted in created too)
//   flotilla_node_sandbox_create_failures_total{reason}    creates refused or failed: admission
//                                                          (over the warning threshold),
//                                                          invalid_request, runtime
//   flotilla_node_sandbox_crashes_total{reason}            sandboxes that broke (sandbox_died,
//                                                          sandbox_broken, oom, ...)
//   flotilla_node_exec_stops_total{reason}                 commands the runtime stopped (timeout,
//                                                          oom, pids, policy, output_limit, ...)
//   flotilla_node_sandbox_create_seconds{class}            create latency
//   flotilla_node_sandbox_destroy_seconds                  destroy latency
//   flotilla_node_sandboxes{class,state}                   live now: state running or starting
//                                                          (admitted, being created); written by
//                                                          the agent's collector
//
// Thread-safety: thread-safe (the families are).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "flotilla/common/metrics.h"
#include "flotilla/proto/sandbox.pb.h"

namespace flotilla::node {

// "latency_sensitive" or "best_effort".
std::string ClassLabel(v1::ExecutionClass c);

class NodeMetrics {
 public:
  explicit NodeMetrics(MetricsRegistry& registry);
  void Created(v1::ExecutionClass c, double seconds, bool reused);
  void Destroyed(v1::ExecutionClass c, double seconds);
  void CreateFailed(std::string_view reason);
  void Crashed(std::string_view reason);
  void ExecStopped(std::string_view reason);

 private:
  struct ByClass {
    Counter* created = nullptr;
    Counter* destroyed = nullptr;
    Counter* reused = nullptr;
    Histogram* create_seconds = nullptr;
  };
  // 0: latency_sensitive, 1: best_effort (every other class counts as best effort, as its label says).
  static size_t ClassIndex(v1::ExecutionClass c);

  MetricsRegistry& registry_;
  Histogram* destroy_seconds_;
  std::array<ByClass, 2> by_class_;
};

}  // namespace flotilla::node
