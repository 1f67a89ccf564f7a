// flotilla: one binary for every service and tool. See README.md.
#include <iostream>

#include "commands.h"
#include "flotilla/common/logging.h"

int main(int argc, char** argv) {
  flotilla::InitLogging();
  CLI::App app{"Flotilla: agentic RL at scale: sandboxes, scheduler, MoE engine, worker, trainer bridge"};
  app.require_subcommand(1);
  int exit_code = 0;
  using flotilla::cli::AddPlaceholderCommand;
  AddPlaceholderCommand(app, "up", "Run every service in one process (the embedded default)", &exit_code);
  flotilla::cli::AddSandboxCommand(app, &exit_code);
  AddPlaceholderCommand(app, "scheduler", "Run the scheduler daemon", &exit_code);
  AddPlaceholderCommand(app, "node", "Run the node agent daemon", &exit_code);
  AddPlaceholderCommand(app, "engine", "Run the inference engine daemon", &exit_code);
  AddPlaceholderCommand(app, "worker", "Run the worker (OpenAI/Anthropic endpoints, scaffolds)", &exit_code);
  flotilla::cli::AddBridgeCommand(app, &exit_code);
  flotilla::cli::AddRunCommand(app, &exit_code);
  AddPlaceholderCommand(app, "eval", "Evaluate a model across scaffolds", &exit_code);
  flotilla::cli::AddBenchRolloutCommand(app, &exit_code);
  AddPlaceholderCommand(app, "trajectories", "Export stored trajectories", &exit_code);
  flotilla::cli::AddPolicyCommand(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
