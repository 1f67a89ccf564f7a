// TrialRunner: one trial of an eval job run to its TrialResult: an agent on a task, in its own
// sandbox of the task's built environment, scored by the task's tests. `flotilla eval -p`
// (cli/eval_trials.cc) runs every trial of its jobs through RunTrial; so does the synthesizer's
// difficulty stage (synth/difficulty.h), so that a solve rate means what eval's pass rate means.
//
//   eval::TrialRunOptions o{.agent = "mini", .attempt = 2};
//   o.scaffold.max_steps = 30;
//   eval::TrialRun run = eval::RunTrial(service, sandboxes, &store, task, o);
//   // run.result.reward, run.result.error_type ("" or agent_timeout, sandbox_crashed, ...)
//
// Agents: oracle (the task's solution; the scaffold's "reference"), nop (nothing; "none"), mini
// and terminal (the built-in scaffolds over the service's model), or an agent CLI
// (agent_cli set; its layers already stacked on the task's image by the caller). A sandbox
// refused for lack of room (RESOURCE_EXHAUSTED) is asked for again until `stopped` says stop.
//
// Thread-safety: RunTrial may run concurrently for different trials (as RunScaffold may).
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/eval/trial_result.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/worker/external_agent.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/scaffold.h"
#include "flotilla/worker/terminal_task.h"
#include "flotilla/worker/trajectory_store.h"

namespace flotilla::eval {

struct TrialRunOptions {
  std::string agent;  // oracle, nop, mini, terminal, or an agent CLI's name (with agent_cli)
  int attempt = 1;
  // max_steps, max_tokens, temperature, policy_name, experiment, seed, cpu_request_millicores;
  // scaffold and agent are set from `agent`.
  worker::ScaffoldOptions scaffold;
  const worker::ExternalAgentSpec* agent_cli = nullptr;  // borrowed; an agent CLI's spec
  int worker_port = 0;                                   // an agent CLI's: the worker's HTTP port
  std::function<bool()> stopped;                         // unset: never
};

struct TrialRun {
  TrialResult result;
  std::string agent_output;  // what an agent CLI printed ("" for the built-in agents)
};

// True for oracle, nop, mini and terminal (the agents that need no installed CLI).
bool IsBuiltInAgent(const std::string& agent);

// `base` with scaffold and agent set for `agent` (mini for oracle and nop, as Harbor runs them).
worker::ScaffoldOptions AgentScaffoldOptions(const std::string& agent, worker::ScaffoldOptions base);

// The error type of a finished scaffold run ("" when it ran to a reward): eval/trial_result.h.
std::string TrialErrorType(const absl::StatusOr<worker::ScaffoldResult>& run);

// RunScaffold, asked again every 200 ms while its sandbox is refused for lack of room
// (RESOURCE_EXHAUSTED) and `stopped` (when set) returns false.
absl::StatusOr<worker::ScaffoldResult> RunScaffoldWhenThereIsRoom(worker::ChatService& service,
                                                                  worker::SandboxClient& sandboxes,
                                                                  const worker::TerminalTask& task,
                                                                  const worker::ScaffoldOptions& options,
                                                                  const std::function<bool()>& stopped);

// Runs the trial; every failure is in result.error_type and result.detail. `store` (may be
// null) is the service's trajectory store: the trial's token counts come from its trajectory.
TrialRun RunTrial(worker::ChatService& service, worker::SandboxClient& sandboxes, worker::TrajectoryStore* store,
                  const worker::TerminalTask& task, const TrialRunOptions& options);

}  // namespace flotilla::eval
