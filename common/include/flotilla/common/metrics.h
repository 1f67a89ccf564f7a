// MetricsRegistry: counters, gauges and histograms with labels, rendered in the Prometheus
// text exposition format (0.0.4). Every service registers its families in one registry and
// serves RenderPrometheus() at /metrics.
//
//   MetricsRegistry reg;
//   Counter& req = reg.GetCounter("flotilla_worker_requests_total", "Requests per API",
//                                 {{"api", "openai_chat"}});
//   req.Add();
//   Histogram& step = reg.GetHistogram("flotilla_engine_step_seconds", "Engine step time",
//                                      {0.001, 0.01, 0.1, 1});
//   step.Observe(0.004);
//   auto handle = reg.AddCollector([&](MetricsSnapshotWriter& w) {   // read at scrape time
//     w.Gauge("flotilla_engine_kv_pages", "KV pages", {{"state", "used"}}, pool.used());
//   });
//
// Thread-safety: every method is thread-safe. Get* returns a reference that stays valid as
// long as the registry lives; the hot path (Add/Set/Observe) takes no registry lock. A family
// keeps the type and help of its first registration; asking for it again with another type or
// another set of histogram bounds is a programming error (aborts). Names and label names are
// checked against Prometheus' grammar (a bad one aborts: they are literals in the code, not input).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace flotilla {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  // Adds `v` (>= 0; a negative value is ignored: counters only go up).
  void Add(double v = 1.0);
  [[nodiscard]] double value() const;

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v);
  void Add(double v);
  [[nodiscard]] double value() const;

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: strictly increasing upper bounds; +Inf follows implicitly.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  struct Reading {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    uint64_t count = 0;
    double sum = 0.0;
  };
  [[nodiscard]] Reading Read() const;
  [[nodiscard]] const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bucket, not cumulative
  std::atomic<double> sum_{0.0};
};

// Writes figures read at scrape time (a collector's output). Families written by several
// collectors, or by a collector and a registered family of the same name, are merged.
class MetricsSnapshotWriter {
 public:
  virtual ~MetricsSnapshotWriter() = default;
  virtual void Gauge(std::string_view name, std::string_view help, const MetricLabels& labels,
                     double value) = 0;
  virtual void Counter(std::string_view name, std::string_view help, const MetricLabels& labels,
                       double value) = 0;
};

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter& GetCounter(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  Gauge& GetGauge(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  Histogram& GetHistogram(std::string_view name, std::string_view help, std::vector<double> bounds,
                          const MetricLabels& labels = {});

  using Collector = std::function<void(MetricsSnapshotWriter&)>;
  // Keeps a collector registered; destroying it removes the collector, waiting for a scrape
  // that is running it to finish (so a collector may read its owner until the owner's
  // destructor destroys the handle).
  class CollectorHandle {
   public:
    CollectorHandle() = default;
    CollectorHandle(CollectorHandle&& other) noexcept;
    CollectorHandle& operator=(CollectorHandle&& other) noexcept;
    ~CollectorHandle();

   private:
    friend class MetricsRegistry;
    CollectorHandle(MetricsRegistry* registry, uint64_t id) : registry_(registry), id_(id) {}
    MetricsRegistry* registry_ = nullptr;
    uint64_t id_ = 0;
  };
  // Collectors run on the scraping thread, in the order added, each time RenderPrometheus runs.
  [[nodiscard]] CollectorHandle AddCollector(Collector collector);

  // Every family sorted by name, children sorted by labels; HELP and TYPE once per family.
  [[nodiscard]] std::string RenderPrometheus() const;

  // Exponential bucket bounds: start, start*factor, ... (count values).
  static std::vector<double> ExponentialBounds(double start, double factor, int count);

 private:
  struct Family;
  Family& FamilyFor(std::string_view name, std::string_view help, int type);

  void RemoveCollector(uint64_t id);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Family>, std::less<>> families_ ABSL_GUARDED_BY(mu_);
  // Held shared while collectors run, exclusively while one is removed.
  mutable absl::Mutex collectors_mu_;
  std::map<uint64_t, Collector> collectors_ ABSL_GUARDED_BY(collectors_mu_);
  uint64_t next_collector_ ABSL_GUARDED_BY(collectors_mu_) = 1;
};

// Prometheus text escaping of a label value (backslash, double quote, newline).
std::string EscapeLabelValue(std::string_view v);

}  // namespace flotilla
