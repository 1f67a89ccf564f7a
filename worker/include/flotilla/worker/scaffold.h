// Built-in scaffolds over a Terminal-Bench style task: a sandbox is created, the task's
// environment files are copied in, an agent works in it, then the task's tests run in the same
// sandbox and give the reward, and the sandbox is destroyed. The whole interaction is one
// ChatService session whose trajectory (with task, scaffold, sandbox, reward, status) is
// stored when the run ends and returned in the result.
//
//   single-turn  the simplest: the model answers the instruction once (system text from the
//             options); the reply is written to kSingleTurnResponsePath in the sandbox, where
//             the task's tests read it.
//   mini      a mini-SWE style loop: the model answers with exactly one ```bash fenced block
//             per turn; it runs in the sandbox and the output is the next user turn, until a
//             command's first output line is COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT.
//   terminal  a Terminal-Bench style tool-calling agent: the model calls the `bash` tool
//             (arguments {"command": ...}) and finishes by calling `submit`.
//
// Tests killed by the sandbox (OOM, pids, policy, the sandbox dying or breaking, its node
// lost, its disk full) end the run with status FAILED, the reason in `detail` and the
// sandbox's stop reason as the repercussion; the trajectory is stored like any other. Bad
// options and a sandbox that cannot be created (nothing ran: no session is opened) are errors
// (a full cluster is ResourceExhausted: callers may wait and retry).
//
// Agent "reference" runs the task's reference solution instead of the model, and "none" does
// nothing: both check a task (the reference must pass, doing nothing must fail). Agent "cli"
// runs a real agent CLI (options.agent_cli: Pi, Codex, ...) in the task's sandbox with the task
// instruction as its prompt, its requests reaching the worker at options.worker_port through
// the in-sandbox endpoint; the trajectory is its session, the scaffold name the CLI's.
//
// The trajectory's metrics carry turns, tool_calls, sandbox_create_ms and sandbox_destroy_ms.
//
// Thread-safety: RunScaffold may run concurrently for different tasks.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/common/clock.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/worker/external_agent.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/terminal_task.h"

namespace flotilla::worker {

// Where the single-turn scaffold writes the model's reply in the sandbox.
inline constexpr char kSingleTurnResponsePath[] = "/logs/agent/response.txt";

struct ScaffoldOptions {
  std::string scaffold = "mini";     // "single-turn", "mini" or "terminal"
  std::string agent = "model";       // "model", "reference", "none" or "cli"
  uint32_t max_steps = 20;
  uint32_t max_tokens = 256;         // per model turn
  bool exact_tokens = false;         // every turn generates exactly max_tokens (benchmarks)
  // single-turn: the system text; mini, terminal: put before the scaffold's own system text.
  std::string system_prompt;
  // mini, terminal: the scaffold's own texts, replaced (as mini-swe-agent's config replaces
  // them); empty: the built-in ones. instance_template is the first user turn, in which "{{task}}"
  // stands for the task's instruction (it must appear: a template without it is an error).
  std::string system_template;
  std::string instance_template;
  // The session (and trajectory) id; empty: chosen by the ChatService.
  std::string session_id;
  // Trajectory header fields the caller sets (dataset, group, effort, metrics); the run fills
  // in task, scaffold, sandbox and experiment.
  v1::Trajectory header;
  float temperature = 1.0f;
  std::optional<uint64_t> seed;
  std::string policy_name = "no-network";
  // The CPU the run's sandbox reserves at admission (resources.cpu_request_millicores), at most
  // the task's cpus, which stay its limit; 0: the limit is the reservation (or, for a task
  // without cpus, the node's default charge).
  uint32_t cpu_request_millicores = 0;
  std::string experiment;
  uint32_t command_timeout_ms = 60'000;
  uint32_t output_limit_bytes = 10'000;  // of a command's output shown to the model
  const Clock* clock = &SystemClock::Get();
  const ExternalAgentSpec* agent_cli = nullptr;  // agent "cli": borrowed, outlives the run
  int worker_port = 0;                           // agent "cli": the worker's HTTP port on 127.0.0.1
  // When set, the run's sandbox is handed to it once the run is done with it (its tests ran,
  // its result is final) instead of destroyed on the run's path; the callee destroys it (returns
  // it to its node's warm pool) off that path, and sandbox_destroy_ms is the hand-over.
  std::function<void(const std::string& sandbox_id)> release;
};

struct ScaffoldResult {
  std::string trajectory_id;
  std::string sandbox_id;
  double reward = 0;
  v1::TrajectoryStatus status = v1::TRAJECTORY_STATUS_UNSPECIFIED;
  v1::StopReason repercussion = v1::STOP_REASON_NONE;
  std::string detail;
  int steps = 0;                     // model turns
  int commands = 0;                  // commands the agent ran in the sandbox (tool calls)
  std::string agent_output;          // an agent CLI's stdout and stderr (agent "cli")
  double sandbox_create_ms = 0;
  double sandbox_destroy_ms = 0;
  v1::Trajectory trajectory;         // as stored
};

absl::StatusOr<ScaffoldResult> RunScaffold(ChatService& service, SandboxClient& sandbox,
                                           const TerminalTask& task, const ScaffoldOptions& options);

// The one fenced bash block of a mini-SWE reply: the commands, or an error text for the model
// when there is not exactly one block.
struct MiniAction {
  bool ok = false;
  std::string command;
  std::string error;
};
MiniAction ParseMiniAction(const std::string& reply_text);

}  // namespace flotilla::worker
