// Standalone `flotilla bench rollout`, linked with only the libraries the benchmark needs.
#include "CLI/CLI.hpp"
#include "rollout_bench_flags.h"

int main(int argc, char** argv) {
  CLI::App app("Async (eta=4) vs synchronous rollout on a long-tail workload");
  flotilla::bench::RolloutBenchOptions o;
  flotilla::bench::AddRolloutBenchFlags(&app, &o);
  CLI11_PARSE(app, argc, argv);
  return flotilla::bench::RunRolloutBench(o);
}
