// Built-in scaffolds over a Terminal-Bench style task: a sandbox is created, the task's
// environment files are copied in, an agent works in it, then the task's tests run in the same
// sandbox and give the reward. The whole interaction is one ChatService session whose
// trajectory (with task, scaffold, sandbox, reward, status) is stored when the run ends.
//
//   mini      a mini-SWE style loop: the model answers with exactly one ```bash fenced block
//             per turn; it runs in the sandbox and the output is the next user turn, until a
//             command's first output line is COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT.
//   terminal  a Terminal-Bench style tool-calling agent: the model calls the `bash` tool
//             (arguments {"command": ...}) and finishes by calling `submit`.
//
// Agent "reference" runs the task's reference solution instead of the model, and "none" does
// nothing: both check a task (the reference must pass, doing nothing must fail). Agent "cli"
// runs a real agent CLI (options.agent_cli: Pi, Codex, ...) in the task's sandbox with the task
// instruction as its prompt, its requests reaching the worker at options.worker_port through
// the in-sandbox endpoint; the trajectory is its session, the scaffold name the CLI's.
//
// Thread-safety: RunScaffold may run concurrently for different tasks.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/common/clock.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/worker/external_agent.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/terminal_task.h"

namespace flotilla::worker {

struct ScaffoldOptions {
  std::string scaffold = "mini";     // "mini" or "terminal"
  std::string agent = "model";       // "model", "reference", "none" or "cli"
  uint32_t max_steps = 20;
  uint32_t max_tokens = 256;         // per model turn
  // Put before the scaffold's own system text (and a blank line) when not empty.
  std::string system_prompt;
  float temperature = 1.0f;
  std::optional<uint64_t> seed;
  std::string policy_name = "no-network";
  std::string experiment;
  uint32_t command_timeout_ms = 60'000;
  uint32_t output_limit_bytes = 10'000;  // of a command's output shown to the model
  const Clock* clock = &SystemClock::Get();
  const ExternalAgentSpec* agent_cli = nullptr;  // agent "cli": borrowed, outlives the run
  int worker_port = 0;                           // agent "cli": the worker's HTTP port on 127.0.0.1
};

struct ScaffoldResult {
  std::string trajectory_id;
  std::string sandbox_id;
  double reward = 0;
  v1::TrajectoryStatus status = v1::TRAJECTORY_STATUS_UNSPECIFIED;
  std::string detail;
  int steps = 0;
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
