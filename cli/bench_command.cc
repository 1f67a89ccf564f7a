// `flotilla bench <name>`: runs a benchmark and prints name=value lines.
#include <iostream>
#include <memory>

#include "commands.h"
#include "flotilla/bench/sandbox_bench.h"
#include "flotilla/bench/soak_bench.h"
#include "scheduler_bench.h"

namespace flotilla::cli {

void AddBenchCommand(CLI::App& app, int* exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "Run a benchmark (sandbox, soak, scheduler, engine, rollout)");
  bench->require_subcommand(1);
  flotilla::bench::RegisterSandboxBench(*bench, exit_code);
  flotilla::bench::RegisterSoakBench(*bench, exit_code);
  RegisterEngineBench(*bench, exit_code);
  RegisterEvalBench(*bench, exit_code);

  auto o = std::make_shared<bench::SchedulerBenchOptions>();
  CLI::App* sched = bench->add_subcommand("scheduler", "Scheduler simulator: real placement code, simulated nodes");
  sched->add_option("--nodes", o->nodes, "simulated nodes")->capture_default_str();
  sched->add_option("--slots-per-node", o->slots_per_node, "worker slots per node")->capture_default_str();
  sched->add_option("--numa-domains", o->numa_domains, "NUMA domains per node (one partition each)")->capture_default_str();
  sched->add_option("--units", o->units, "scale units")->capture_default_str();
  sched->add_option("--replicas", o->replicas, "placement-engine replicas per unit")->capture_default_str();
  sched->add_option("--threads", o->threads, "client threads (0: one per core)")->capture_default_str();
  sched->add_option("--sandboxes", o->sandboxes, "placements to make")->capture_default_str();
  sched->add_option("--utilization", o->utilization, "share of slots kept in flight")->capture_default_str();
  sched->add_option("--ls-fraction", o->ls_fraction, "latency-sensitive share of arrivals")->capture_default_str();
  sched->add_option("--median-lifetime", o->median_lifetime_s, "median rollout lifetime, virtual seconds")->capture_default_str();
  sched->add_option("--heartbeat-ms", o->heartbeat_ms, "node report interval")->capture_default_str();
  sched->add_option("--fit", o->fit, "spread or best-fit")->capture_default_str();
  sched->add_option("--seed", o->seed, "workload seed")->capture_default_str();
  sched->add_flag("!--no-baseline", o->baseline, "skip the global-lock baseline");
  sched->callback([o, exit_code] { *exit_code = bench::RunSchedulerBench(*o, std::cout); });
}

}  // namespace flotilla::cli
