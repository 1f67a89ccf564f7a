#include "idle_density.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace flotilla::bench {
namespace {

constexpr int kThreads = 8;

uint64_t MemAvailableKib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value;
  }
  return 0;
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

absl::StatusOr<IdleDensity> MeasureIdleDensity(sandbox::Runtime& runtime, int target) {
  IdleDensity d;
  bool tty = ::isatty(2);
  uint64_t before_kib = MemAvailableKib();
  std::vector<std::string> ids;
  std::mutex mu;
  std::atomic<bool> stop{false};
  auto t0 = std::chrono::steady_clock::now();
  auto creator = [&] {
    while (!stop.load()) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (static_cast<int>(ids.size()) >= target) return;
      }
      sandbox::SandboxOptions options;
      options.policy_name = "default";
      options.labels = {{"bench", "idle"}};
      auto created = runtime.Create(options);
      std::lock_guard<std::mutex> lock(mu);
      if (!created.ok()) {
        if (d.stopped_by.empty()) d.stopped_by = created.status().ToString();
        stop = true;
        return;
      }
      ids.push_back(created->id);
      if (static_cast<int>(ids.size()) > target) {
        // Another thread reached the target first: this one is surplus.
        (void)runtime.Destroy(ids.back());
        ids.pop_back();
        return;
      }
      if (tty && ids.size() % 50 == 0) std::fprintf(stderr, "\ridle sandboxes: %zu/%d", ids.size(), target);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(creator);
  for (std::thread& t : threads) t.join();
  d.create_s = Since(t0);
  d.count = static_cast<int>(ids.size());
  if (tty) std::fprintf(stderr, "\n");
  if (d.count == 0) return absl::InternalError(absl::StrCat("no idle sandbox could be created: ", d.stopped_by));

  // Let the sandboxes settle (their inits are idle), then measure.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  uint64_t after_kib = MemAvailableKib();
  d.host_kib_per_sandbox = before_kib > after_kib ? double(before_kib - after_kib) / d.count : 0;
  uint64_t charged = 0;
  for (const sandbox::SandboxInfo& info : runtime.List()) charged += info.memory_used_bytes;
  d.cgroup_kib_per_sandbox = double(charged) / 1024.0 / d.count;

  auto t1 = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  absl::Status first_error;
  std::vector<std::thread> destroyers;
  for (int i = 0; i < kThreads; ++i) {
    destroyers.emplace_back([&] {
      for (size_t k = next.fetch_add(1); k < ids.size(); k = next.fetch_add(1)) {
        absl::Status s = runtime.Destroy(ids[k]);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.ok()) first_error = s;
        }
      }
    });
  }
  for (std::thread& t : destroyers) t.join();
  d.destroy_s = Since(t1);
  if (!first_error.ok()) return first_error;
  return d;
}

}  // namespace flotilla::bench
