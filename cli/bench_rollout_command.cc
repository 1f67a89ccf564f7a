// `flotilla bench rollout`: async sample-level dispatch against synchronous batch rollout on the
// real engine (bench/rollout_bench.h). Attaches to the shared `bench` subcommand.
#include "commands.h"
#include "rollout_bench.h"

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
  rollout->add_option("--steps", o->steps, "training steps per mode");
  rollout->add_option("--prompts-per-step", o->prompts_per_step, "groups per training step");
  rollout->add_option("--group-size", o->group_size, "samples per group");
  rollout->add_option("--median", o->median, "median response length (lognormal)");
  rollout->add_option("--sigma", o->sigma, "lognormal sigma");
  rollout->add_option("--cap", o->cap, "length cap");
  rollout->add_option("--eta", o->eta, "staleness bound of the async mode");
  rollout->add_option("--threads", o->threads, "engine threads (0: all cores)");
  rollout->add_option("--seed", o->seed, "workload seed");
  rollout->callback([o, exit_code] { *exit_code = bench::RunRolloutBench(*o); });
}

}  // namespace flotilla::cli
