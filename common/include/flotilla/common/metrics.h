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
// long as the registry lives; the hot path (Add/Set/Observe) takes no lock: a counter or a
// histogram is striped, each thread recording with relaxed atomics into a stripe of its own (a
// cache line no other stripe shares), and a read sums the stripes, so threads recording into
// one child at once do not contend for its cache line. Look a child up once (Get*) and keep the
// reference: the lookup takes the registry lock and renders the labels. A scrape holds the
// registry lock only to list the children; it reads and formats them after releasing it. A family
// keeps the type and help of its first registration; asking for it again with another type or
// another set of histogram bounds is a programming error (aborts). Names and label names are
// checked against Prometheus' grammar (a bad one aborts: they are literals in the code, not input).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
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

namespace metrics_internal {

// Stripes of a counter or a histogram. Threads are dealt stripes round robin at their first
// record, so up to kStripes threads record without sharing a cache line.
inline constexpr size_t kStripes = 16;
size_t ThisThreadStripe();

struct alignas(64) DoubleCell {
  std::atomic<double> value{0.0};
};

}  // namespace metrics_internal

class Counter {
 public:
  // Adds `v` (>= 0; a negative value is ignored: counters only go up).
  void Add(double v = 1.0);
  // The sum of the stripes: exact for whole-number adds (up to 2^53 in all).
  [[nodiscard]] double value() const;

 private:
  std::array<metrics_internal::DoubleCell, metrics_internal::kStripes> stripes_;
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
  struct alignas(64) Line {
    std::atomic<uint64_t> slot[8];
  };
  // Slot `i` of stripe `s`: per-bucket counts (not cumulative) in slots 0..bounds, then the
  // stripe's sum (the bits of a double) in slot bounds + 1.
  std::atomic<uint64_t>& Slot(size_t stripe, size_t i) const {
    return lines_[stripe * lines_per_stripe_ + i / 8].slot[i % 8];
  }

  std::vector<double> bounds_;
  size_t lines_per_stripe_;
  std::unique_ptr<Line[]> lines_;
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
  // A histogram read elsewhere: `cumulative` holds one count per bound, then +Inf (so its size
  // is bounds.size() + 1; a mismatch is a programming error and aborts).
  virtual void Histogram(std::string_view name, std::string_view help, const MetricLabels& labels,
                         const std::vector<double>& bounds, const std::vector<uint64_t>& cumulative,
                         double sum) = 0;
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
