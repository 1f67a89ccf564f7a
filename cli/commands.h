// Subcommand registration for the flotilla CLI. Each Add*Command attaches one subcommand
// (and its own subcommands) to the app; the callback sets *exit_code.
#pragma once

#include "CLI/CLI.hpp"

namespace flotilla::cli {

// Subcommands whose component has not landed yet: each says so and exits 2.
void AddPlaceholderCommand(CLI::App& app, const char* name, const char* description, int* exit_code);
void AddPolicyCommand(CLI::App& app, int* exit_code);

// `flotilla sandbox run|image build` (cli/sandbox_command.cc).
void AddSandboxCommand(CLI::App& app, int* exit_code);

// `flotilla run`: an RL experiment end to end (trainer_bridge).
void AddRunCommand(CLI::App& app, int* exit_code);
// `flotilla bench rollout` (trainer_bridge); creates `bench` if no one has yet.
void AddBenchRolloutCommand(CLI::App& app, int* exit_code);
// `flotilla bridge serve|status|reconfigure` (trainer_bridge).
void AddBridgeCommand(CLI::App& app, int* exit_code);

}  // namespace flotilla::cli
