// flotilla: one binary for every service and tool. See README.md.
#include <iostream>

#include "commands.h"
#include "flotilla/common/logging.h"

int main(int argc, char** argv) {
  flotilla::InitLogging();
  CLI::App app{"Flotilla: agentic RL at scale: sandboxes, scheduler, MoE engine, worker, trainer bridge"};
  app.require_subcommand(1);
  int exit_code = 0;
  flotilla::cli::AddUpCommand(app, &exit_code);
  flotilla::cli::AddSandboxCommand(app, &exit_code);
  flotilla::cli::AddSchedulerCommand(app, &exit_code);
  flotilla::cli::AddNodeCommand(app, &exit_code);
  flotilla::cli::AddEngineCommand(app, &exit_code);
  flotilla::cli::AddWorkerCommand(app, &exit_code);
  flotilla::cli::AddBridgeCommand(app, &exit_code);
  flotilla::cli::AddRunCommand(app, &exit_code);
  flotilla::cli::AddEvalCommand(app, &exit_code);
  flotilla::cli::AddMergeCommand(app, &exit_code);
  flotilla::cli::AddBenchCommand(app, &exit_code);
  flotilla::cli::AddBenchRolloutCommand(app, &exit_code);
  flotilla::cli::AddTrajectoriesCommand(app, &exit_code);
  flotilla::cli::AddPolicyCommand(app, &exit_code);
  flotilla::cli::AddModelCommand(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
