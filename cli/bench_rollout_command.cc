// `flotilla bench rollout`: async sample-level dispatch against synchronous batch rollout on the
// real engine (bench/rollout_bench.h). Attaches to the shared `bench` subcommand.
#include "commands.h"
#include "rollout_bench_flags.h"

namespace flotilla::cli {

void AddBenchRolloutCommand(CLI::App& app, int* exit_code) {
  CLI::App* bench = nullptr;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == "bench") bench = sub;
  }
  if (bench == nullptr) {
    bench = app.add_subcommand("bench", "Run a benchmark (sandbox, scheduler, engine, rollout)");
    bench->require_subcommand(1);
  }
  auto o = std::make_shared<bench::RolloutBenchOptions>();
  CLI::App* rollout = bench->add_subcommand("rollout", "Async (eta=4) vs synchronous rollout on a long-tail workload");
  bench::AddRolloutBenchFlags(rollout, o.get());
  rollout->callback([o, exit_code] { *exit_code = bench::RunRolloutBench(*o); });
}

}  // namespace flotilla::cli
