#include "flotilla/scheduler/metrics.h"

#include <cstdio>
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

namespace {

// Shortest exact decimal form of a bucket bound in seconds ("0.00001", "1", "10").
std::string Seconds(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9f", static_cast<double>(ns) / 1e9);
  std::string s(buf);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

struct Family {
  const char* name;
  const char* type;
  const char* help;
};

void Header(std::string& out, const Family& f) {
  absl::StrAppend(&out, "# HELP ", f.name, " ", f.help, "\n# TYPE ", f.name, " ", f.type, "\n");
}

}  // namespace

std::string RenderPrometheus(FrontDoor& front) {
  struct UnitFigures {
    std::string name;
    UnitStats stats;
    LatencyHistogram::Reading latency;
    double fill;
  };
  std::vector<UnitFigures> units;
  for (size_t k = 0; k < front.unit_count(); ++k) {
    ScaleUnit& u = front.unit(k);
    units.push_back({u.name(), u.Stats(), u.latency().Read(), u.Fill()});
  }
  std::string out;
  auto counter = [&](const Family& f, uint64_t PlacementStats::*field) {
    Header(out, f);
    for (const UnitFigures& u : units) {
      absl::StrAppend(&out, f.name, "{unit=\"", u.name, "\"} ", u.stats.placement.*field, "\n");
    }
  };
  counter({"flotilla_scheduler_placements_total", "counter", "Sandboxes placed (node admitted)."},
          &PlacementStats::placements);
  counter({"flotilla_scheduler_node_calls_total", "counter", "Placement calls made to nodes."},
          &PlacementStats::attempts);
  counter({"flotilla_scheduler_conflicts_total", "counter",
           "Node answers that differed from the replica's view (rejections included)."},
          &PlacementStats::conflicts);
  counter({"flotilla_scheduler_rejections_total", "counter", "Placements a node's admission check rejected."},
          &PlacementStats::rejections);
  counter({"flotilla_scheduler_retries_total", "counter", "Node calls beyond the first for one placement."},
          &PlacementStats::retries);
  counter({"flotilla_scheduler_node_errors_total", "counter", "Node calls that failed (node unreachable)."},
          &PlacementStats::node_errors);
  counter({"flotilla_scheduler_no_capacity_total", "counter", "Choices that found no node with room in the view."},
          &PlacementStats::no_capacity);

  const Family latency{"flotilla_scheduler_placement_latency_seconds", "histogram",
                       "CreateSandbox latency in a scale unit: choice, node admission, journal."};
  Header(out, latency);
  for (const UnitFigures& u : units) {
    uint64_t cumulative = 0;
    for (size_t b = 0; b < u.latency.buckets.size(); ++b) {
      cumulative += u.latency.buckets[b];
      std::string le = b < LatencyHistogram::kBoundsNs.size() ? Seconds(LatencyHistogram::kBoundsNs[b]) : "+Inf";
      absl::StrAppend(&out, latency.name, "_bucket{unit=\"", u.name, "\",le=\"", le, "\"} ", cumulative, "\n");
    }
    absl::StrAppend(&out, latency.name, "_sum{unit=\"", u.name, "\"} ",
                    static_cast<double>(u.latency.sum_ns) / 1e9, "\n");
    absl::StrAppend(&out, latency.name, "_count{unit=\"", u.name, "\"} ", u.latency.count, "\n");
  }

  Header(out, {"flotilla_scheduler_nodes", "gauge", "Nodes of the unit by liveness."});
  for (const UnitFigures& u : units) {
    absl::StrAppend(&out, "flotilla_scheduler_nodes{unit=\"", u.name, "\",state=\"alive\"} ", u.stats.live_nodes,
                    "\n");
    absl::StrAppend(&out, "flotilla_scheduler_nodes{unit=\"", u.name, "\",state=\"dead\"} ", u.stats.dead_nodes,
                    "\n");
  }
  Header(out, {"flotilla_scheduler_sandboxes", "gauge", "Sandboxes the unit holds, by state."});
  for (const UnitFigures& u : units) {
    const std::pair<const char*, uint64_t> states[] = {
        {"pending", u.stats.pending}, {"running", u.stats.running}, {"lost", u.stats.lost_now}};
    for (const auto& [state, n] : states) {
      absl::StrAppend(&out, "flotilla_scheduler_sandboxes{unit=\"", u.name, "\",state=\"", state, "\"} ", n, "\n");
    }
  }
  Header(out, {"flotilla_scheduler_sandboxes_lost_total", "counter",
               "Sandboxes declared lost (their node died or no longer had them)."});
  for (const UnitFigures& u : units) {
    absl::StrAppend(&out, "flotilla_scheduler_sandboxes_lost_total{unit=\"", u.name, "\"} ", u.stats.lost, "\n");
  }
  Header(out, {"flotilla_scheduler_unit_fill", "gauge", "Share of the unit's live slots its sandboxes hold."});
  for (const UnitFigures& u : units) {
    absl::StrAppend(&out, "flotilla_scheduler_unit_fill{unit=\"", u.name, "\"} ", u.fill, "\n");
  }
  return out;
}

}  // namespace flotilla::scheduler
