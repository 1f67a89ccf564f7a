#include "node_metrics.h"

namespace flotilla::node {
namespace {

std::vector<double> LatencyBounds() { return MetricsRegistry::ExponentialBounds(0.001, 4, 8); }  // 1 ms .. 16 s

}  // namespace

std::string ClassLabel(v1::ExecutionClass c) {
  return c == v1::LATENCY_SENSITIVE ? "latency_sensitive" : "best_effort";
}

size_t NodeMetrics::ClassIndex(v1::ExecutionClass c) { return c == v1::LATENCY_SENSITIVE ? 0 : 1; }

NodeMetrics::NodeMetrics(MetricsRegistry& r)
    : registry_(r),
      destroy_seconds_(&r.GetHistogram("flotilla_node_sandbox_destroy_seconds", "Sandbox destroy latency on the node",
                                       LatencyBounds())) {
  // Both classes from the start, so a scrape shows every family before the first sandbox; the
  // children are kept, so a create or destroy records without the registry's lock.
  for (v1::ExecutionClass c : {v1::LATENCY_SENSITIVE, v1::BEST_EFFORT}) {
    ByClass& k = by_class_[ClassIndex(c)];
    k.created = &r.GetCounter("flotilla_node_sandboxes_created_total", "Sandboxes the node created",
                              {{"class", ClassLabel(c)}});
    k.destroyed = &r.GetCounter("flotilla_node_sandboxes_destroyed_total", "Sandboxes the node destroyed",
                                {{"class", ClassLabel(c)}});
    k.reused = &r.GetCounter("flotilla_node_sandboxes_reused_total",
                             "Sandbox creates handed a reset sandbox of the warm pool", {{"class", ClassLabel(c)}});
    k.create_seconds = &r.GetHistogram("flotilla_node_sandbox_create_seconds", "Sandbox create latency on the node",
                                       LatencyBounds(), {{"class", ClassLabel(c)}});
  }
  r.GetCounter("flotilla_node_sandbox_create_failures_total", "Sandbox creates the node refused or failed",
               {{"reason", "admission"}});
  r.GetCounter("flotilla_node_sandbox_crashes_total", "Sandboxes that broke or died", {{"reason", "sandbox_died"}});
  r.GetCounter("flotilla_node_exec_stops_total", "Commands the runtime stopped, by reason", {{"reason", "timeout"}});
}

void NodeMetrics::Created(v1::ExecutionClass c, double seconds, bool reused) {
  const ByClass& k = by_class_[ClassIndex(c)];
  k.created->Add();
  if (reused) k.reused->Add();
  k.create_seconds->Observe(seconds);
}

void NodeMetrics::Destroyed(v1::ExecutionClass c, double seconds) {
  by_class_[ClassIndex(c)].destroyed->Add();
  destroy_seconds_->Observe(seconds);
}

void NodeMetrics::CreateFailed(std::string_view reason) {
  registry_.GetCounter("flotilla_node_sandbox_create_failures_total", "", {{"reason", std::string(reason)}}).Add();
}

void NodeMetrics::Crashed(std::string_view reason) {
  registry_.GetCounter("flotilla_node_sandbox_crashes_total", "", {{"reason", std::string(reason)}}).Add();
}

void NodeMetrics::ExecStopped(std::string_view reason) {
  registry_.GetCounter("flotilla_node_exec_stops_total", "", {{"reason", std::string(reason)}}).Add();
}

}  // namespace flotilla::node
