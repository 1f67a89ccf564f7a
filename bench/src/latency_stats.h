// Latency bookkeeping for the benchmarks: run one operation n times across c threads and
// summarize. Header-only; every function is reentrant.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace flotilla::bench {

struct LatencySummary {
  int count = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double mean_ms = 0;
  double wall_s = 0;
  double per_s = 0;  // count / wall_s
};

// Nearest-rank percentile of `sorted` (ascending), q in (0, 1].
inline double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(q * static_cast<double>(sorted.size()) + 0.999999);
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

// Runs `op(worker, i)` for i in [0, n) on `concurrency` threads; the first error stops the run
// and is returned. Each op is timed; `progress` (may be null) sees the number done so far.
inline absl::Status RunTimed(int n, int concurrency, const std::function<absl::Status(int worker, int i)>& op,
                             LatencySummary* out, const std::function<void(int)>& progress = nullptr) {
  std::vector<double> latencies;
  std::mutex mu;
  absl::Status first_error;
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  auto start = std::chrono::steady_clock::now();
  auto worker = [&](int w) {
    while (!failed.load()) {
      int i = next.fetch_add(1);
      if (i >= n) return;
      auto t0 = std::chrono::steady_clock::now();
      absl::Status s = op(w, i);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok()) {
        if (first_error.ok()) first_error = s;
        failed = true;
        return;
      }
      latencies.push_back(ms);
      if (progress) progress(static_cast<int>(latencies.size()));
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < concurrency; ++w) threads.emplace_back(worker, w);
  for (std::thread& t : threads) t.join();
  if (!first_error.ok()) return first_error;
  std::sort(latencies.begin(), latencies.end());
  out->count = static_cast<int>(latencies.size());
  out->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out->p50_ms = Percentile(latencies, 0.50);
  out->p99_ms = Percentile(latencies, 0.99);
  double sum = 0;
  for (double l : latencies) sum += l;
  out->mean_ms = latencies.empty() ? 0 : sum / static_cast<double>(latencies.size());
  out->per_s = out->wall_s > 0 ? out->count / out->wall_s : 0;
  return absl::OkStatus();
}

// Prints "<prefix>.p50_ms=..., p99_ms, mean_ms, per_s" lines.
inline void PrintSummary(const std::string& prefix, const LatencySummary& s) {
  std::printf("%s.p50_ms=%.3f\n%s.p99_ms=%.3f\n%s.mean_ms=%.3f\n%s.per_s=%.1f\n", prefix.c_str(), s.p50_ms,
              prefix.c_str(), s.p99_ms, prefix.c_str(), s.mean_ms, prefix.c_str(), s.per_s);
  std::fflush(stdout);
}

}  // namespace flotilla::bench
