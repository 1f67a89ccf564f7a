// `flotilla bench scheduler`: the scheduler simulator. Runs the real FrontDoor / ScaleUnit /
// PlacementEngine code, replicas driven from several threads, against simulated nodes whose
// admission is the node agent's own NodeLedger, under a workload of short-lived rollouts
// (lognormal lifetimes, mixed latency-sensitive and best-effort) that keeps a target share
// of the fleet's slots in flight; then the same workload through one engine under one global
// lock. Prints name=value lines.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace flotilla::bench {

struct SchedulerBenchOptions {
  uint32_t nodes = 400;
  uint32_t slots_per_node = 2500;
  uint32_t numa_domains = 2;          // per simulated node; one partition per domain
  uint32_t units = 8;
  uint32_t replicas = 4;              // per unit
  uint32_t threads = 0;               // client threads; 0: hardware concurrency
  uint64_t sandboxes = 1'000'000;     // placements to make
  double utilization = 0.90;          // share of all slots kept in flight
  double ls_fraction = 0.2;           // latency-sensitive share of arrivals
  double median_lifetime_s = 30.0;    // lognormal lifetime of a rollout (virtual time)
  double lifetime_sigma = 1.0;
  uint32_t tenants = 64;
  int64_t heartbeat_ms = 100;
  std::string fit = "spread";         // "spread" or "best-fit"
  bool baseline = true;               // also run the global-lock baseline
  uint64_t seed = 1;
};

// Runs the simulation and prints its figures to `out`. Returns a process exit code
// (0 ok, 2 bad options).
int RunSchedulerBench(const SchedulerBenchOptions& options, std::ostream& out);

}  // namespace flotilla::bench
