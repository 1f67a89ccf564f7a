#include "scheduler_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iomanip>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "flotilla/common/clock.h"
#include "flotilla/scheduler/front_door.h"
#include "flotilla/scheduler/numa.h"
#include "flotilla/scheduler_sim/simulated_node.h"

namespace flotilla::bench {
namespace {

using scheduler::FrontDoor;
using scheduler::FrontDoorOptions;
using scheduler::SimulatedNode;

struct RunResult {
  double seconds = 0;
  double cpu_seconds = 0;   // CPU the whole process used meanwhile (clients, engines, nodes, reports)
  uint64_t placed = 0;
  uint64_t failed = 0;      // requests the scheduler could not place
  std::vector<uint32_t> latencies_ns;
  double utilization = 0;   // slots in use / slots, at the end
  double peak_utilization = 0;
  scheduler::UnitStats stats;
};

struct Departure {
  double at;
  std::string id;
  uint32_t unit;
  bool operator>(const Departure& o) const { return at > o.at; }
};

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

uint32_t UnitIndex(const std::string& name) {
  uint32_t k = 0;
  (void)absl::SimpleAtoi(std::string(name.substr(name.find('-') + 1)), &k);
  return k;
}

// One simulated node: `domains` NUMA domains of 128 CPUs each, 512 MiB of memory per slot.
std::vector<scheduler::PartitionUsage> NodeShape(const SchedulerBenchOptions& o) {
  std::vector<scheduler::NumaDomain> domains;
  for (uint32_t d = 0; d < o.numa_domains; ++d) {
    scheduler::NumaDomain nd;
    nd.node = d;
    nd.cpus = absl::StrCat(d * 128, "-", d * 128 + 127);
    nd.cpu_count = 128;
    nd.memory_bytes = uint64_t{o.slots_per_node / o.numa_domains} * (512ull << 20);
    domains.push_back(nd);
  }
  return scheduler::CutPartitions(domains, o.slots_per_node);
}

RunResult RunOnce(const SchedulerBenchOptions& o, bool global_lock) {
  const Clock& clock = SystemClock::Get();
  FrontDoorOptions fo;
  fo.units = global_lock ? 1 : o.units;
  fo.seed = o.seed;
  fo.unit.replicas = global_lock ? 1 : o.replicas;
  fo.unit.heartbeat_interval_ms = o.heartbeat_ms;
  fo.unit.heartbeat_timeout_ms = 3600'000;
  fo.unit.engine.fit = o.fit == "best-fit" ? scheduler::FitPolicy::kBestFit : scheduler::FitPolicy::kSpread;
  fo.unit.engine.retry_backoff_us = 20;
  fo.unit.engine.max_attempts = 8;
  fo.unit.engine.admission.memory_overcommit = 1.25;
  std::unique_ptr<FrontDoor> front = *FrontDoor::Open(fo, clock, nullptr);

  std::vector<std::shared_ptr<SimulatedNode>> nodes;
  for (uint32_t i = 0; i < o.nodes; ++i) {
    auto node = std::make_shared<SimulatedNode>(absl::StrCat("node-", i), NodeShape(o), fo.unit.engine.admission);
    (void)front->AddNode(i % fo.units, node->id(), node, node->ledger().Usage());
    nodes.push_back(std::move(node));
  }
  const double capacity = static_cast<double>(uint64_t{o.nodes} * o.slots_per_node);
  auto utilization = [&] {
    uint64_t used = 0;
    for (auto& n : nodes) used += n->ledger().Usage().TotalUsed().slots;
    return static_cast<double>(used) / capacity;
  };

  // Nodes report on a timer, as node agents heartbeat.
  absl::Notification stop;
  std::atomic<double> peak{0};
  std::thread reporter([&] {
    while (!stop.WaitForNotificationWithTimeout(absl::Milliseconds(o.heartbeat_ms))) {
      uint64_t used = 0;
      for (auto& n : nodes) {
        scheduler::NodeUsageSnapshot u = n->ledger().Usage();
        used += u.TotalUsed().slots;
        (void)front->Heartbeat(n->id(), u, nullptr);
      }
      peak.store(std::max(peak.load(), static_cast<double>(used) / capacity));
    }
  });

  const uint32_t threads = o.threads != 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> tenants;
  for (uint32_t i = 0; i < std::max(1u, o.tenants); ++i) tenants.push_back(absl::StrCat("exp-", i));
  std::mutex global;
  std::vector<std::vector<uint32_t>> latencies(threads);
  std::atomic<uint64_t> placed{0}, failed{0};
  Stopwatch wall(clock);
  const double cpu_start = ProcessCpuSeconds();
  std::vector<std::thread> workers;
  for (uint32_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(o.seed * 7919 + t);
      std::lognormal_distribution<double> lifetime(std::log(o.median_lifetime_s), o.lifetime_sigma);
      std::uniform_real_distribution<double> uni(0, 1);
      const uint64_t quota = o.sandboxes / threads + (t < o.sandboxes % threads ? 1 : 0);
      const uint64_t in_flight_target = static_cast<uint64_t>(o.utilization * capacity / threads);
      std::priority_queue<Departure, std::vector<Departure>, std::greater<Departure>> departures;
      std::vector<uint32_t>& lat = latencies[t];
      lat.reserve(quota);
      double now = 0;
      uint64_t done = 0;
      v1::CreateSandboxRequest req;
      auto depart = [&] {
        Departure d = departures.top();
        departures.pop();
        now = d.at;
        if (global_lock) {
          std::lock_guard<std::mutex> g(global);
          (void)front->unit(d.unit).DeleteSandbox(d.id);
        } else {
          (void)front->unit(d.unit).DeleteSandbox(d.id);
        }
      };
      while (done < quota) {
        if (departures.size() >= in_flight_target) {
          depart();
          continue;
        }
        req.set_tenant(tenants[rng() % tenants.size()]);
        bool ls = uni(rng) < o.ls_fraction;
        req.set_execution_class(ls ? v1::LATENCY_SENSITIVE : v1::BEST_EFFORT);
        double m = uni(rng);
        req.mutable_resources()->set_memory_bytes(m < 0.3 ? (256ull << 20) : m < 0.8 ? (512ull << 20) : (1ull << 30));
        req.mutable_resources()->set_cpu_quota_millicores(ls ? 250 : 20);
        int64_t t0 = clock.NowNanos();
        absl::StatusOr<v1::SandboxPlacement> p;
        if (global_lock) {
          std::lock_guard<std::mutex> g(global);
          p = front->CreateSandbox(req);
        } else {
          p = front->CreateSandbox(req);
        }
        int64_t dt = clock.NowNanos() - t0;
        if (!p.ok()) {
          failed.fetch_add(1, std::memory_order_relaxed);
          if (!departures.empty()) depart();
          continue;
        }
        lat.push_back(static_cast<uint32_t>(std::min<int64_t>(dt, UINT32_MAX)));
        ++done;
        departures.push({now + lifetime(rng), p->sandbox_id(), UnitIndex(p->scale_unit())});
      }
      placed.fetch_add(done);
    });
  }
  for (auto& w : workers) w.join();
  RunResult r;
  r.seconds = wall.ElapsedMillis() / 1000.0;
  r.cpu_seconds = ProcessCpuSeconds() - cpu_start;
  stop.Notify();
  reporter.join();
  r.placed = placed.load();
  r.failed = failed.load();
  for (auto& l : latencies) r.latencies_ns.insert(r.latencies_ns.end(), l.begin(), l.end());
  r.utilization = utilization();
  r.peak_utilization = std::max(peak.load(), r.utilization);
  r.stats = front->Stats();
  return r;
}

double Percentile(std::vector<uint32_t>& v, double q) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return static_cast<double>(v[k]) / 1000.0;
}

void Print(std::ostream& out, const std::string& prefix, RunResult& r) {
  double rate = r.seconds > 0 ? static_cast<double>(r.placed) / r.seconds : 0;
  double attempts = static_cast<double>(std::max<uint64_t>(r.stats.placement.attempts, 1));
  out << std::fixed << std::setprecision(3);
  out << prefix << "placed=" << r.placed << "\n";
  out << prefix << "seconds=" << r.seconds << "\n";
  out << prefix << "placements_per_s=" << std::setprecision(0) << rate << std::setprecision(3) << "\n";
  out << prefix << "cpu_seconds=" << r.cpu_seconds << "\n";
  out << prefix << "placements_per_cpu_s=" << std::setprecision(0)
      << (r.cpu_seconds > 0 ? static_cast<double>(r.placed) / r.cpu_seconds : 0) << std::setprecision(3) << "\n";
  out << prefix << "p50_us=" << Percentile(r.latencies_ns, 0.50) << "\n";
  out << prefix << "p99_us=" << Percentile(r.latencies_ns, 0.99) << "\n";
  out << prefix << "rejection_rate=" << std::setprecision(5)
      << static_cast<double>(r.stats.placement.rejections) / attempts << std::setprecision(3) << "\n";
  out << prefix << "conflicts=" << r.stats.placement.conflicts << "\n";
  out << prefix << "rejections=" << r.stats.placement.rejections << "\n";
  out << prefix << "node_calls=" << r.stats.placement.attempts << "\n";
  out << prefix << "unplaced=" << r.failed << "\n";
  out << prefix << "utilization=" << r.utilization << "\n";
  out << prefix << "peak_utilization=" << r.peak_utilization << "\n";
}

}  // namespace

int RunSchedulerBench(const SchedulerBenchOptions& o, std::ostream& out) {
  if (o.nodes == 0 || o.slots_per_node == 0 || o.units == 0 || o.replicas == 0 || o.numa_domains == 0) {
    out << "error: nodes, slots-per-node, units, replicas and numa-domains must be positive\n";
    return 2;
  }
  if (o.units > o.nodes) {
    out << "error: units: " << o.units << " units need at least as many nodes (have " << o.nodes << ")\n";
    return 2;
  }
  if (!(o.utilization > 0 && o.utilization <= 1)) {
    out << "error: utilization: must be in (0, 1]\n";
    return 2;
  }
  if (o.fit != "spread" && o.fit != "best-fit") {
    out << "error: fit: expected 'spread' or 'best-fit', got '" << o.fit << "'\n";
    return 2;
  }
  // The simulator measures placement, not absl's debug-build lock-order bookkeeping.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const uint32_t threads = o.threads != 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  out << "sched.nodes=" << o.nodes << "\nsched.slots_per_node=" << o.slots_per_node << "\nsched.units=" << o.units
      << "\nsched.replicas_per_unit=" << o.replicas << "\nsched.threads=" << threads << "\nsched.fit=" << o.fit << "\n";
  RunResult sharded = RunOnce(o, /*global_lock=*/false);
  Print(out, "sched.", sharded);
  out.flush();
  if (o.baseline) {
    RunResult global = RunOnce(o, /*global_lock=*/true);
    Print(out, "sched.global_lock.", global);
    double a = sharded.seconds > 0 ? static_cast<double>(sharded.placed) / sharded.seconds : 0;
    double b = global.seconds > 0 ? static_cast<double>(global.placed) / global.seconds : 0;
    out << "sched.speedup_vs_global_lock=" << std::setprecision(2) << (b > 0 ? a / b : 0) << "\n";
    double ca = sharded.cpu_seconds > 0 ? static_cast<double>(sharded.placed) / sharded.cpu_seconds : 0;
    double cb = global.cpu_seconds > 0 ? static_cast<double>(global.placed) / global.cpu_seconds : 0;
    out << "sched.cpu_efficiency_vs_global_lock=" << (cb > 0 ? ca / cb : 0) << "\n";
  }
  return 0;
}

}  // namespace flotilla::bench
