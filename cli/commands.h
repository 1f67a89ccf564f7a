// Subcommand registration for the flotilla CLI. Each Add*Command attaches one subcommand
// (and its own subcommands) to the app; the callback sets *exit_code.
#pragma once

#include "CLI/CLI.hpp"

namespace flotilla::cli {

void AddPolicyCommand(CLI::App& app, int* exit_code);

// `flotilla sandbox run|image build` (cli/sandbox_command.cc).
void AddSandboxCommand(CLI::App& app, int* exit_code);
// `flotilla node` (cli/node_command.cc).
void AddNodeCommand(CLI::App& app, int* exit_code);

// `flotilla bench <name>` (bench_command.cc).
void AddBenchCommand(CLI::App& app, int* exit_code);
// `flotilla scheduler` (scheduler_command.cc).
void AddSchedulerCommand(CLI::App& app, int* exit_code);

// `flotilla engine` (the inference engine daemon) and `flotilla bench engine`.
void AddEngineCommand(CLI::App& app, int* exit_code);
// Adds `bench engine` to the `bench` subcommand (cli/engine_command.cc).
void RegisterEngineBench(CLI::App& bench, int* exit_code);
// flotilla up (cli/up_command.cc), flotilla worker, flotilla trajectories.
void AddUpCommand(CLI::App& app, int* exit_code);
void AddWorkerCommand(CLI::App& app, int* exit_code);
void AddTrajectoriesCommand(CLI::App& app, int* exit_code);

// `flotilla run`: an RL experiment end to end (trainer_bridge).
void AddRunCommand(CLI::App& app, int* exit_code);
// `flotilla eval`: one model across built-in harnesses on a task folder (eval_command.cc).
void AddEvalCommand(CLI::App& app, int* exit_code);
// Adds `bench eval` (environment builds, eval-job throughput) to `bench` (eval_bench.cc).
void RegisterEvalBench(CLI::App& bench, int* exit_code);
// `flotilla env build|ls|rm|prune`: task environments from Dockerfiles (env_command.cc).
void AddEnvCommand(CLI::App& app, int* exit_code);
// `flotilla synth`: coding tasks synthesized from a source tree (synth_command.cc).
void AddSynthCommand(CLI::App& app, int* exit_code);
// `flotilla bench rollout` (trainer_bridge); creates `bench` if no one has yet.
void AddBenchRolloutCommand(CLI::App& app, int* exit_code);
// `flotilla bridge serve|status|reconfigure` (trainer_bridge).
void AddBridgeCommand(CLI::App& app, int* exit_code);
// `flotilla model tokenize` and the other verbs over a Hugging Face model folder (model_command.cc).
void AddModelCommand(CLI::App& app, int* exit_code);
// Adds `chat-template` to the `model` group (model_chat_template_command.cc).
void AddModelChatTemplateCommand(CLI::App& model, int* exit_code);

// `flotilla merge CONFIG.yaml --out DIR` (cli/merge_command.cc).
void AddMergeCommand(CLI::App& app, int* exit_code);

// Adds `chat-template` to the `model` group (model_chat_template_command.cc).
void AddModelChatTemplateCommand(CLI::App& model, int* exit_code);
// `flotilla model logprobs` on the `model` group (model_logprobs_command.cc).
void AddModelLogprobsVerb(CLI::App& model, int* exit_code);
// Adds `init` to the `model` group (model_init_command.cc).
void AddModelInitVerb(CLI::App& model, int* exit_code);

}  // namespace flotilla::cli
