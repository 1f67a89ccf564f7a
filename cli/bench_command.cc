// `flotilla bench NAME`: one registration per benchmark; each prints name=value lines.
#include "commands.h"
#include "flotilla/bench/sandbox_bench.h"

namespace flotilla::cli {

void AddBenchCommand(CLI::App& app, int* exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "Run a benchmark (sandbox, scheduler, engine, rollout)");
  bench->require_subcommand(1);
  flotilla::bench::RegisterSandboxBench(*bench, exit_code);
}

}  // namespace flotilla::cli
