// flotilla_metrics_bench: what the metric primitives cost on the recording side, alone and
// with threads recording into the same child at once, and what a scrape of a registry the size
// of the embedded platform's costs. Prints name=value lines (bench/RESULTS.md).
//
//   metrics.counter_add_ns_t1 / _t2 / _t4          Counter::Add, CPU ns per call
//   metrics.histogram_observe_ns_t1 / _t2 / _t4    Histogram::Observe (14 bounds)
//   metrics.lookup_add_ns                          GetCounter(name, labels).Add() (a child looked
//                                                  up by its labels on every event)
//   metrics.lookup_add_ns_while_scraping           the same, a thread rendering beside it
//   metrics.render_us                              RenderPrometheus of ~60 children
//   metrics.render_bytes
//
// CPU time per call (each thread's own CPU clock, summed over the threads, over the calls they
// made), so that time a thread spends descheduled by other work on a shared machine does not
// count; the cache-line transfers of threads recording at once do. The best of three runs.
#include <algorithm>
#include <atomic>
#include <ctime>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/common/metrics.h"

namespace {

using flotilla::Counter;
using flotilla::Histogram;
using flotilla::MetricsRegistry;
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// CPU ns per call of `fn(i)` run `n` times on each of `threads` threads at once.
template <class Fn>
double NsPerCall(int threads, int n, Fn fn) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::atomic<double> cpu{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&] {
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        const double c0 = ThreadCpuSeconds();
        for (int i = 0; i < n; ++i) fn(i);
        const double used = ThreadCpuSeconds() - c0;
        double cur = cpu.load();
        while (!cpu.compare_exchange_weak(cur, cur + used)) {
        }
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    go = true;
    for (auto& t : ts) t.join();
    best = std::min(best, cpu.load() * 1e9 / (static_cast<double>(n) * threads));
  }
  return best;
}

// A registry shaped like the embedded platform's: counters with a label or two, gauges and
// latency histograms, about 60 children in 25 families.
void Populate(MetricsRegistry& reg) {
  const auto bounds = MetricsRegistry::ExponentialBounds(0.001, 4, 9);
  for (int f = 0; f < 10; ++f) {
    for (const char* cls : {"best_effort", "latency_sensitive", "other"}) {
      reg.GetCounter("bench_events_" + std::to_string(f) + "_total", "Events", {{"class", cls}}).Add(f + 1);
    }
  }
  for (int f = 0; f < 8; ++f) {
    for (const char* state : {"running", "starting"}) {
      reg.GetGauge("bench_things_" + std::to_string(f), "Things", {{"state", state}}).Set(f);
    }
  }
  for (int f = 0; f < 7; ++f) {
    Histogram& h = reg.GetHistogram("bench_latency_" + std::to_string(f) + "_seconds", "Latency", bounds,
                                    {{"class", "best_effort"}});
    for (int i = 0; i < 100; ++i) h.Observe(0.0005 * i);
  }
}

}  // namespace

int main() {
  MetricsRegistry reg;
  Populate(reg);
  Counter& c = reg.GetCounter("bench_hot_total", "Hot counter");
  Histogram& h = reg.GetHistogram("bench_hot_seconds", "Hot histogram", MetricsRegistry::ExponentialBounds(0.0005, 2, 14));
  constexpr int kN = 2'000'000;
  for (int threads : {1, 2, 4}) {
    std::printf("metrics.counter_add_ns_t%d=%.2f\n", threads, NsPerCall(threads, kN, [&](int) { c.Add(); }));
    std::printf("metrics.histogram_observe_ns_t%d=%.2f\n", threads,
                NsPerCall(threads, kN, [&](int i) { h.Observe(0.0001 * (i & 1023)); }));
  }
  auto lookup = [&](int i) {
    reg.GetCounter("bench_events_3_total", "", {{"class", (i & 1) != 0 ? "best_effort" : "other"}}).Add();
  };
  std::printf("metrics.lookup_add_ns=%.2f\n", NsPerCall(1, kN / 10, lookup));
  {
    std::atomic<bool> stop{false};
    std::thread scraper([&] {
      while (!stop.load()) (void)reg.RenderPrometheus();
    });
    std::printf("metrics.lookup_add_ns_while_scraping=%.2f\n", NsPerCall(1, kN / 10, lookup));
    stop = true;
    scraper.join();
  }
  size_t bytes = 0;
  double best = 1e30;
  for (int rep = 0; rep < 200; ++rep) {
    const double c0 = ThreadCpuSeconds();
    bytes = reg.RenderPrometheus().size();
    best = std::min(best, ThreadCpuSeconds() - c0);
  }
  std::printf("metrics.render_us=%.1f\nmetrics.render_bytes=%zu\n", best * 1e6, bytes);
  return 0;
}
