// Scheduler metrics: the placement-latency histogram each scale unit keeps, and the
// Prometheus text exposition (format 0.0.4) of a FrontDoor's figures, per scale unit:
//
//   flotilla_scheduler_placements_total{unit="unit-0"} 1234
//   flotilla_scheduler_placement_latency_seconds_bucket{unit="unit-0",le="0.0001"} 1200
//   flotilla_scheduler_sandboxes{unit="unit-0",state="running"} 1200
//
// LatencyHistogram is thread-safe and lock-free (relaxed atomic counters); a read taken while
// placements run may be a few placements behind, never torn per counter.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "flotilla/common/metrics.h"

namespace flotilla::scheduler {

class FrontDoor;

class LatencyHistogram {
 public:
  // Upper bounds of the buckets, in nanoseconds; one more bucket (+Inf) follows.
  static constexpr std::array<int64_t, 13> kBoundsNs = {
      10'000,  25'000,    50'000,    100'000,    250'000,    500'000,      1'000'000,
      2'500'000, 5'000'000, 10'000'000, 100'000'000, 1'000'000'000, 10'000'000'000};

  struct Reading {
    std::array<uint64_t, kBoundsNs.size() + 1> buckets{};  // per bucket, not cumulative
    uint64_t count = 0;
    int64_t sum_ns = 0;
  };

  void Record(int64_t ns);
  [[nodiscard]] Reading Read() const;

 private:
  std::array<std::atomic<uint64_t>, kBoundsNs.size() + 1> buckets_{};
  std::atomic<int64_t> sum_ns_{0};
};

// Every scale unit's counters, gauges and latency histogram, as Prometheus text.
[[nodiscard]] std::string RenderPrometheus(FrontDoor& front);

// The same figures written into a scrape (a collector's body).
void WriteSchedulerMetrics(FrontDoor& front, MetricsSnapshotWriter& writer);

// Keeps the scheduler's figures in `registry` (the embedded default's one registry) while the
// handle lives; `front` must outlive the handle.
[[nodiscard]] MetricsRegistry::CollectorHandle AddSchedulerCollector(MetricsRegistry& registry, FrontDoor& front);

}  // namespace flotilla::scheduler
