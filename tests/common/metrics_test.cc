#include "flotilla/common/metrics.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace flotilla {
namespace {

TEST(MetricsRegistryTest, RendersCountersWithHelpTypeAndSortedLabels) {
  MetricsRegistry reg;
  reg.GetCounter("flotilla_worker_requests_total", "Requests per API", {{"api", "openai_chat"}}).Add(3);
  reg.GetCounter("flotilla_worker_requests_total", "ignored", {{"api", "anthropic_messages"}}).Add();
  EXPECT_EQ(reg.RenderPrometheus(),
            "# HELP flotilla_worker_requests_total Requests per API\n"
            "# TYPE flotilla_worker_requests_total counter\n"
            "flotilla_worker_requests_total{api=\"anthropic_messages\"} 1\n"
            "flotilla_worker_requests_total{api=\"openai_chat\"} 3\n");
}

TEST(MetricsRegistryTest, SameLabelsReturnTheSameChild) {
  MetricsRegistry reg;
  Counter& a = reg.GetCounter("c_total", "h", {{"k", "v"}});
  Counter& b = reg.GetCounter("c_total", "h", {{"k", "v"}});
  EXPECT_EQ(&a, &b);
  a.Add(2);
  b.Add(-5);  // counters never go down
  EXPECT_EQ(a.value(), 2.0);
}

TEST(MetricsRegistryTest, GaugesSetAndAddAndPrintFractions) {
  MetricsRegistry reg;
  Gauge& g = reg.GetGauge("flotilla_engine_kv_pages", "KV pages", {{"state", "used"}});
  g.Set(10);
  g.Add(-2.5);
  EXPECT_EQ(reg.RenderPrometheus(),
            "# HELP flotilla_engine_kv_pages KV pages\n"
            "# TYPE flotilla_engine_kv_pages gauge\n"
            "flotilla_engine_kv_pages{state=\"used\"} 7.5\n");
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  MetricsRegistry reg;
  Histogram& h = reg.GetHistogram("step_seconds", "Step time", {0.01, 0.1, 1});
  for (double v : {0.0078125, 0.01, 0.0625, 0.5, 7.0}) h.Observe(v);
  EXPECT_EQ(reg.RenderPrometheus(),
            "# HELP step_seconds Step time\n"
            "# TYPE step_seconds histogram\n"
            "step_seconds_bucket{le=\"0.01\"} 2\n"
            "step_seconds_bucket{le=\"0.1\"} 3\n"
            "step_seconds_bucket{le=\"1\"} 4\n"
            "step_seconds_bucket{le=\"+Inf\"} 5\n"
            "step_seconds_sum 7.5803125\n"
            "step_seconds_count 5\n");
}

TEST(MetricsRegistryTest, LabelledHistogramPutsLeLast) {
  MetricsRegistry reg;
  reg.GetHistogram("lat_seconds", "x", {1}, {{"op", "create"}}).Observe(2);
  std::string text = reg.RenderPrometheus();
  EXPECT_NE(text.find("lat_seconds_bucket{op=\"create\",le=\"1\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{op=\"create\",le=\"+Inf\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_count{op=\"create\"} 1\n"), std::string::npos) << text;
}

TEST(MetricsRegistryTest, CollectorsAddFamiliesReadAtScrapeTime) {
  MetricsRegistry reg;
  int sandboxes = 4;
  {
    auto handle = reg.AddCollector([&](MetricsSnapshotWriter& w) {
      w.Gauge("flotilla_node_sandboxes", "Sandboxes by state", {{"state", "running"}}, sandboxes);
    });
    EXPECT_NE(reg.RenderPrometheus().find("flotilla_node_sandboxes{state=\"running\"} 4\n"), std::string::npos);
    sandboxes = 9;
    EXPECT_NE(reg.RenderPrometheus().find("flotilla_node_sandboxes{state=\"running\"} 9\n"), std::string::npos);
    MetricsRegistry::CollectorHandle moved = std::move(handle);
    EXPECT_NE(reg.RenderPrometheus().find("flotilla_node_sandboxes"), std::string::npos);
  }
  // The handle is gone: so is its collector.
  EXPECT_EQ(reg.RenderPrometheus().find("flotilla_node_sandboxes"), std::string::npos);
}

TEST(MetricsRegistryTest, LabelValuesAreEscaped) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  MetricsRegistry reg;
  reg.GetGauge("g", "h", {{"path", "x\"y"}}).Set(1);
  EXPECT_NE(reg.RenderPrometheus().find("g{path=\"x\\\"y\"} 1\n"), std::string::npos);
}

TEST(MetricsRegistryTest, ConcurrentAddsAreNotLost) {
  MetricsRegistry reg;
  Counter& c = reg.GetCounter("n_total", "h");
  Histogram& h = reg.GetHistogram("v", "h", {0.5});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Add();
        h.Observe(1.0);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 40000.0);
  EXPECT_EQ(h.Read().count, 40000u);
  EXPECT_EQ(h.Read().sum, 40000.0);
}

// More threads than stripes, so several threads share a stripe as well as each having one.
TEST(MetricsRegistryTest, StripedCounterIsExactUnderConcurrentAdds) {
  MetricsRegistry reg;
  Counter& c = reg.GetCounter("striped_total", "h");
  Counter& tokens = reg.GetCounter("tokens_total", "h");
  constexpr int kThreads = 2 * static_cast<int>(metrics_internal::kStripes) + 3;
  constexpr int kAdds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) {
        c.Add();
        tokens.Add(static_cast<double>(t + 1));
      }
      tokens.Add(-5);  // ignored: counters only go up
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 1.0 * kThreads * kAdds);
  EXPECT_EQ(tokens.value(), 1.0 * kAdds * kThreads * (kThreads + 1) / 2);
  EXPECT_NE(reg.RenderPrometheus().find("striped_total 700000\n"), std::string::npos) << reg.RenderPrometheus();
}

TEST(MetricsRegistryTest, StripedHistogramIsExactPerBucketUnderConcurrentObserves) {
  MetricsRegistry reg;
  Histogram& h = reg.GetHistogram("latency", "h", {1, 2, 4});
  constexpr int kThreads = 37;
  constexpr int kPerValue = 1000;
  // Every thread observes 0.5 (le 1), 2 (le 2, on the bound), 3 (le 4) and 9 (+Inf) kPerValue times.
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerValue; ++i) {
        for (double v : {0.5, 2.0, 3.0, 9.0}) h.Observe(v);
      }
    });
  }
  for (auto& t : threads) t.join();
  const Histogram::Reading r = h.Read();
  const uint64_t n = uint64_t{kThreads} * kPerValue;
  EXPECT_EQ(r.cumulative, (std::vector<uint64_t>{n, 2 * n, 3 * n, 4 * n}));
  EXPECT_EQ(r.count, 4 * n);
  EXPECT_EQ(r.sum, 14.5 * static_cast<double>(n));
}

// A reader sees every counter only go up while threads add, and the last read is exact.
TEST(MetricsRegistryTest, ReadsWhileAddingNeverGoBackward) {
  MetricsRegistry reg;
  Counter& c = reg.GetCounter("n_total", "h");
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&] {
      for (int i = 0; i < 50000; ++i) c.Add();
    });
  }
  std::thread reader([&] {
    double last = 0;
    int backward = 0;
    while (!done.load()) {
      const double v = c.value();
      backward += v < last ? 1 : 0;
      last = v;
    }
    EXPECT_EQ(backward, 0);
  });
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(c.value(), 200000.0);
}

// Children registered while scrapes run: each scrape is well formed and the last one has them all.
TEST(MetricsRegistryTest, ScrapesWhileRegisteringSeeConsistentFamilies) {
  MetricsRegistry reg;
  std::atomic<bool> done{false};
  std::thread registrar([&] {
    for (int i = 0; i < 300; ++i) {
      // The histogram first: it sorts first, so every non-empty scrape starts with it.
      reg.GetHistogram("made_seconds", "Made", {0.1, 1}, {{"n", std::to_string(i)}}).Observe(0.5);
      reg.GetCounter("made_total", "Made", {{"n", std::to_string(i)}}).Add(i);
    }
    done = true;
  });
  int scrapes = 0;
  while (!done.load() || scrapes == 0) {
    const std::string text = reg.RenderPrometheus();
    ++scrapes;
    if (!text.empty()) {
      EXPECT_EQ(text.rfind("# HELP made_seconds Made\n# TYPE made_seconds histogram\n", 0), 0u) << text.substr(0, 200);
    }
  }
  registrar.join();
  const std::string text = reg.RenderPrometheus();
  EXPECT_NE(text.find("made_total{n=\"299\"} 299\n"), std::string::npos);
  EXPECT_NE(text.find("made_seconds_bucket{n=\"299\",le=\"1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("made_seconds_count{n=\"0\"} 1\n"), std::string::npos);
}

TEST(MetricsRegistryTest, CollectorsWriteHistogramsReadElsewhere) {
  MetricsRegistry reg;
  auto handle = reg.AddCollector([](MetricsSnapshotWriter& w) {
    w.Histogram("place_seconds", "Placement time", {{"unit", "u0"}}, {0.001, 0.01}, {2, 5, 6}, 0.25);
  });
  EXPECT_EQ(reg.RenderPrometheus(),
            "# HELP place_seconds Placement time\n"
            "# TYPE place_seconds histogram\n"
            "place_seconds_bucket{unit=\"u0\",le=\"0.001\"} 2\n"
            "place_seconds_bucket{unit=\"u0\",le=\"0.01\"} 5\n"
            "place_seconds_bucket{unit=\"u0\",le=\"+Inf\"} 6\n"
            "place_seconds_sum{unit=\"u0\"} 0.25\n"
            "place_seconds_count{unit=\"u0\"} 6\n");
}

TEST(MetricsRegistryTest, ExponentialBounds) {
  EXPECT_EQ(MetricsRegistry::ExponentialBounds(0.001, 10, 3), (std::vector<double>{0.001, 0.01, 0.1}));
}

TEST(MetricsRegistryDeathTest, TypeClashIsAProgrammingError) {
  MetricsRegistry reg;
  reg.GetCounter("x", "h");
  EXPECT_DEATH(reg.GetGauge("x", "h"), "registered as counter");
  EXPECT_DEATH(reg.GetCounter("bad name", "h"), "bad metric name");
}

}  // namespace
}  // namespace flotilla
