#include "flotilla/scheduler/metrics.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/scheduler/front_door.h"

namespace flotilla::scheduler {

void LatencyHistogram::Record(int64_t ns) {
  size_t b = 0;
  while (b < kBoundsNs.size() && ns > kBoundsNs[b]) ++b;
  buckets_[b].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(ns, std::memory_order_relaxed);
}

LatencyHistogram::Reading LatencyHistogram::Read() const {
  Reading r;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    r.buckets[b] = buckets_[b].load(std::memory_order_relaxed);
    r.count += r.buckets[b];
  }
  r.sum_ns = sum_ns_.load(std::memory_order_relaxed);
  return r;
}

std::string RenderPrometheus(FrontDoor& front) {
  MetricsRegistry registry;
  MetricsRegistry::CollectorHandle handle = AddSchedulerCollector(registry, front);
  return registry.RenderPrometheus();
}

MetricsRegistry::CollectorHandle AddSchedulerCollector(MetricsRegistry& registry, FrontDoor& front) {
  return registry.AddCollector([&front](MetricsSnapshotWriter& w) { WriteSchedulerMetrics(front, w); });
}

void WriteSchedulerMetrics(FrontDoor& front, MetricsSnapshotWriter& w) {
  std::vector<double> bounds;
  for (int64_t ns : LatencyHistogram::kBoundsNs) bounds.push_back(static_cast<double>(ns) / 1e9);
  for (size_t k = 0; k < front.unit_count(); ++k) {
    ScaleUnit& u = front.unit(k);
    const UnitStats stats = u.Stats();
    const MetricLabels unit = {{"unit", u.name()}};
    const PlacementStats& p = stats.placement;
    w.Counter("flotilla_scheduler_placements_total", "Sandboxes placed (node admitted).", unit,
              static_cast<double>(p.placements));
    w.Counter("flotilla_scheduler_node_calls_total", "Placement calls made to nodes.", unit,
              static_cast<double>(p.attempts));
    w.Counter("flotilla_scheduler_conflicts_total",
              "Node answers that differed from the replica's view (rejections included).", unit,
              static_cast<double>(p.conflicts));
    w.Counter("flotilla_scheduler_rejections_total", "Placements a node's admission check rejected.", unit,
              static_cast<double>(p.rejections));
    w.Counter("flotilla_scheduler_retries_total", "Node calls beyond the first for one placement.", unit,
              static_cast<double>(p.retries));
    w.Counter("flotilla_scheduler_node_errors_total", "Node calls that failed (node unreachable).", unit,
              static_cast<double>(p.node_errors));
    w.Counter("flotilla_scheduler_no_capacity_total", "Choices that found no node with room in the view.", unit,
              static_cast<double>(p.no_capacity));

    const LatencyHistogram::Reading latency = u.latency().Read();
    std::vector<uint64_t> cumulative;
    uint64_t running = 0;
    for (uint64_t b : latency.buckets) cumulative.push_back(running += b);
    w.Histogram("flotilla_scheduler_placement_latency_seconds",
                "CreateSandbox latency in a scale unit: choice, node admission, journal.", unit, bounds, cumulative,
                static_cast<double>(latency.sum_ns) / 1e9);

    auto with = [&unit](const char* key, const char* value) {
      MetricLabels l = unit;
      l.emplace_back(key, value);
      return l;
    };
    w.Gauge("flotilla_scheduler_nodes", "Nodes of the unit by liveness.", with("state", "alive"),
            static_cast<double>(stats.live_nodes));
    w.Gauge("flotilla_scheduler_nodes", "", with("state", "dead"), static_cast<double>(stats.dead_nodes));
    const std::pair<const char*, uint64_t> states[] = {
        {"pending", stats.pending}, {"running", stats.running}, {"lost", stats.lost_now}};
    for (const auto& [state, n] : states) {
      w.Gauge("flotilla_scheduler_sandboxes", "Sandboxes the unit holds, by state.", with("state", state),
              static_cast<double>(n));
    }
    w.Counter("flotilla_scheduler_sandboxes_lost_total", "Sandboxes declared lost (their node died or no longer had them).",
              unit, static_cast<double>(stats.lost));
    w.Gauge("flotilla_scheduler_unit_fill", "Share of the unit's live slots its sandboxes hold.", unit, u.Fill());
  }
}

}  // namespace flotilla::scheduler
