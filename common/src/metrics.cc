#include "flotilla/common/metrics.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace flotilla {
namespace {

// Metric names, label names and types are literals of the code: a bad one is a programming
// error, reported loudly before anything is exported under it.
void Require(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "metrics: %s\n", what.c_str());
  std::abort();
}

enum FamilyType { kCounter = 0, kGauge = 1, kHistogram = 2 };

const char* TypeName(int type) {
  switch (type) {
    case kCounter: return "counter";
    case kGauge: return "gauge";
    default: return "histogram";
  }
}

bool ValidName(std::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  char buf[40];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);  // shortest text that reads back as v
  return std::string(buf, end);
}

// `{a="x",b="y"}` (empty for no labels), with `extra` (already escaped) appended last.
std::string RenderLabels(const MetricLabels& labels, std::string_view extra = {}) {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  for (const auto& [k, v] : labels) {
    Require(ValidName(k, false) && k.rfind("__", 0) != 0, absl::StrCat("bad metric label name '", k, "'"));
    if (out.size() > 1) out += ',';
    absl::StrAppend(&out, k, "=\"", EscapeLabelValue(v), "\"");
  }
  if (!extra.empty()) {
    if (out.size() > 1) out += ',';
    out += extra;
  }
  out += '}';
  return out;
}

void AtomicAdd(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace metrics_internal {

size_t ThisThreadStripe() {
  static std::atomic<size_t> next{0};
  thread_local const size_t stripe = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
  return stripe;
}

}  // namespace metrics_internal

void Counter::Add(double v) {
  if (v > 0) AtomicAdd(stripes_[metrics_internal::ThisThreadStripe()].value, v);
}

double Counter::value() const {
  double total = 0.0;
  for (const auto& s : stripes_) total += s.value.load(std::memory_order_relaxed);
  return total;
}

void Gauge::Set(double v) { value_.store(v, std::memory_order_relaxed); }
void Gauge::Add(double v) { AtomicAdd(value_, v); }
double Gauge::value() const { return value_.load(std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      lines_per_stripe_((bounds_.size() + 2 + 7) / 8),
      lines_(new Line[metrics_internal::kStripes * lines_per_stripe_]) {
  for (size_t i = 1; i < bounds_.size(); ++i) Require(bounds_[i - 1] < bounds_[i], "histogram bounds must increase");
  for (size_t s = 0; s < metrics_internal::kStripes; ++s) {
    for (size_t i = 0; i <= bounds_.size(); ++i) Slot(s, i).store(0, std::memory_order_relaxed);
    Slot(s, bounds_.size() + 1).store(std::bit_cast<uint64_t>(0.0), std::memory_order_relaxed);
  }
}

void Histogram::Observe(double v) {
  // The first bound >= v ("le"); NaN compares false everywhere and lands in the first bucket.
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  const size_t stripe = metrics_internal::ThisThreadStripe();
  Slot(stripe, i).fetch_add(1, std::memory_order_relaxed);
  std::atomic<uint64_t>& sum = Slot(stripe, bounds_.size() + 1);
  uint64_t cur = sum.load(std::memory_order_relaxed);
  while (!sum.compare_exchange_weak(cur, std::bit_cast<uint64_t>(std::bit_cast<double>(cur) + v),
                                    std::memory_order_relaxed)) {
  }
}

Histogram::Reading Histogram::Read() const {
  Reading r;
  r.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    for (size_t s = 0; s < metrics_internal::kStripes; ++s) running += Slot(s, i).load(std::memory_order_relaxed);
    r.cumulative[i] = running;
  }
  r.count = running;
  for (size_t s = 0; s < metrics_internal::kStripes; ++s) {
    r.sum += std::bit_cast<double>(Slot(s, bounds_.size() + 1).load(std::memory_order_relaxed));
  }
  return r;
}

struct MetricsRegistry::Family {
  int type = kCounter;
  std::string help;
  std::vector<double> bounds;  // histograms
  // Keyed by the rendered label set, so a child is found by its labels in any later call.
  std::map<std::string, std::unique_ptr<Counter>> counters;
  std::map<std::string, std::unique_ptr<flotilla::Gauge>> gauges;
  std::map<std::string, std::unique_ptr<Histogram>> histograms;
  std::map<std::string, MetricLabels> labels;
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Family& MetricsRegistry::FamilyFor(std::string_view name, std::string_view help, int type) {
  mu_.AssertHeld();  // every caller holds it; tells clang's -Wthread-safety so
  Require(ValidName(name, true), absl::StrCat("bad metric name '", std::string(name), "'"));
  auto it = families_.find(name);
  if (it == families_.end()) {
    auto f = std::make_unique<Family>();
    f->type = type;
    f->help = std::string(help);
    it = families_.emplace(std::string(name), std::move(f)).first;
  }
  Require(it->second->type == type,
          absl::StrCat("metric '", std::string(name), "' registered as ", TypeName(it->second->type)));
  return *it->second;
}

Counter& MetricsRegistry::GetCounter(std::string_view name, std::string_view help, const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Family& f = FamilyFor(name, help, kCounter);
  std::string key = RenderLabels(labels);
  auto& slot = f.counters[key];
  if (!slot) {
    slot = std::make_unique<Counter>();
    f.labels[key] = labels;
  }
  return *slot;
}

Gauge& MetricsRegistry::GetGauge(std::string_view name, std::string_view help, const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Family& f = FamilyFor(name, help, kGauge);
  std::string key = RenderLabels(labels);
  auto& slot = f.gauges[key];
  if (!slot) {
    slot = std::make_unique<flotilla::Gauge>();
    f.labels[key] = labels;
  }
  return *slot;
}

Histogram& MetricsRegistry::GetHistogram(std::string_view name, std::string_view help, std::vector<double> bounds,
                                         const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Family& f = FamilyFor(name, help, kHistogram);
  if (f.histograms.empty() && f.bounds.empty()) f.bounds = bounds;
  Require(f.bounds == bounds, absl::StrCat("histogram '", std::string(name), "' registered with other bounds"));
  std::string key = RenderLabels(labels);
  auto& slot = f.histograms[key];
  if (!slot) {
    slot = std::make_unique<Histogram>(std::move(bounds));
    f.labels[key] = labels;
  }
  return *slot;
}

MetricsRegistry::CollectorHandle MetricsRegistry::AddCollector(Collector collector) {
  absl::WriterMutexLock lock(&collectors_mu_);
  uint64_t id = next_collector_++;
  collectors_.emplace(id, std::move(collector));
  return CollectorHandle(this, id);
}

void MetricsRegistry::RemoveCollector(uint64_t id) {
  absl::WriterMutexLock lock(&collectors_mu_);
  collectors_.erase(id);
}

MetricsRegistry::CollectorHandle::CollectorHandle(CollectorHandle&& other) noexcept
    : registry_(std::exchange(other.registry_, nullptr)), id_(other.id_) {}

MetricsRegistry::CollectorHandle& MetricsRegistry::CollectorHandle::operator=(CollectorHandle&& other) noexcept {
  if (this != &other) {
    if (registry_ != nullptr) registry_->RemoveCollector(id_);
    registry_ = std::exchange(other.registry_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

MetricsRegistry::CollectorHandle::~CollectorHandle() {
  if (registry_ != nullptr) registry_->RemoveCollector(id_);
}

std::vector<double> MetricsRegistry::ExponentialBounds(double start, double factor, int count) {
  Require(start > 0 && factor > 1 && count > 0, "exponential bounds need start > 0, factor > 1, count > 0");
  std::vector<double> out;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) out.push_back(b);
  return out;
}

namespace {

// A histogram's sample lines (without the last newline): buckets with `le` last, sum, count.
std::string HistogramLines(const std::string& name, const MetricLabels& labels, const std::vector<double>& bounds,
                           const std::vector<uint64_t>& cumulative, double sum) {
  const std::string key = RenderLabels(labels);
  std::string lines;
  for (size_t i = 0; i <= bounds.size(); ++i) {
    std::string le = i < bounds.size() ? FormatValue(bounds[i]) : "+Inf";
    absl::StrAppend(&lines, name, "_bucket", RenderLabels(labels, absl::StrCat("le=\"", le, "\"")), " ",
                    cumulative[i], "\n");
  }
  absl::StrAppend(&lines, name, "_sum", key, " ", FormatValue(sum), "\n", name, "_count", key, " ",
                  cumulative.back());
  return lines;
}

// A scrape's view: family name -> type, help, and its sample lines in label order.
struct RenderedFamily {
  int type = kGauge;
  std::string help;
  std::map<std::string, std::string> lines;  // label key -> lines (without trailing newline)
};

class SnapshotWriter : public MetricsSnapshotWriter {
 public:
  explicit SnapshotWriter(std::map<std::string, RenderedFamily, std::less<>>& out) : out_(out) {}
  void Gauge(std::string_view name, std::string_view help, const MetricLabels& labels, double value) override {
    Put(name, help, labels, value, kGauge);
  }
  void Counter(std::string_view name, std::string_view help, const MetricLabels& labels, double value) override {
    Put(name, help, labels, value, kCounter);
  }
  void Histogram(std::string_view name, std::string_view help, const MetricLabels& labels,
                 const std::vector<double>& bounds, const std::vector<uint64_t>& cumulative, double sum) override {
    Require(cumulative.size() == bounds.size() + 1,
            absl::StrCat("histogram '", std::string(name), "': one count per bound and +Inf"));
    Family(name, help, kHistogram).lines[RenderLabels(labels)] =
        HistogramLines(std::string(name), labels, bounds, cumulative, sum);
  }

 private:
  RenderedFamily& Family(std::string_view name, std::string_view help, int type) {
    Require(ValidName(name, true), absl::StrCat("bad metric name '", std::string(name), "'"));
    auto it = out_.find(name);
    if (it == out_.end()) {
      it = out_.emplace(std::string(name), RenderedFamily{type, std::string(help), {}}).first;
    }
    return it->second;
  }
  void Put(std::string_view name, std::string_view help, const MetricLabels& labels, double value, int type) {
    std::string key = RenderLabels(labels);
    Family(name, help, type).lines[key] = absl::StrCat(std::string(name), key, " ", FormatValue(value));
  }
  std::map<std::string, RenderedFamily, std::less<>>& out_;
};

}  // namespace

std::string MetricsRegistry::RenderPrometheus() const {
  // Under mu_ only the list of children: families and children are never removed and map nodes
  // do not move, so the names, keys, labels and children stay valid after the lock is released,
  // and the reading and formatting below does not hold up a thread registering a child.
  struct Child {
    const std::string* key;
    const MetricLabels* labels;
    const Counter* counter = nullptr;
    const flotilla::Gauge* gauge = nullptr;
    const Histogram* histogram = nullptr;
  };
  struct Listed {
    const std::string* name;
    int type;
    const std::string* help;
    std::vector<Child> children;
  };
  std::vector<Listed> listed;
  {
    absl::MutexLock lock(&mu_);
    listed.reserve(families_.size());
    for (const auto& [name, f] : families_) {
      Listed& l = listed.emplace_back(Listed{&name, f->type, &f->help, {}});
      l.children.reserve(f->counters.size() + f->gauges.size() + f->histograms.size());
      for (const auto& [key, c] : f->counters) l.children.push_back({&key, &f->labels.at(key), c.get()});
      for (const auto& [key, g] : f->gauges) l.children.push_back({&key, &f->labels.at(key), nullptr, g.get()});
      for (const auto& [key, h] : f->histograms) {
        l.children.push_back({&key, &f->labels.at(key), nullptr, nullptr, h.get()});
      }
    }
  }
  std::map<std::string, RenderedFamily, std::less<>> rendered;
  for (const Listed& l : listed) {
    RenderedFamily& r = rendered.emplace_hint(rendered.end(), *l.name, RenderedFamily{})->second;
    r.type = l.type;
    r.help = *l.help;
    for (const Child& c : l.children) {
      const std::string& name = *l.name;
      if (c.counter != nullptr) {
        r.lines[*c.key] = absl::StrCat(name, *c.key, " ", FormatValue(c.counter->value()));
      } else if (c.gauge != nullptr) {
        r.lines[*c.key] = absl::StrCat(name, *c.key, " ", FormatValue(c.gauge->value()));
      } else {
        const Histogram::Reading reading = c.histogram->Read();
        r.lines[*c.key] = HistogramLines(name, *c.labels, c.histogram->bounds(), reading.cumulative, reading.sum);
      }
    }
  }
  // Collectors run outside mu_ (they take their owners' locks, which may be held by code
  // that registers metrics) and under collectors_mu_ shared, so their owners outlive them.
  {
    absl::ReaderMutexLock lock(&collectors_mu_);
    SnapshotWriter writer(rendered);
    for (const auto& [id, c] : collectors_) c(writer);
  }

  std::string out;
  for (const auto& [name, r] : rendered) {
    absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(r.help), "\n# TYPE ", name, " ", TypeName(r.type), "\n");
    for (const auto& [key, line] : r.lines) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace flotilla
