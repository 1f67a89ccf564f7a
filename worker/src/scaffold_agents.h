// The agents of the built-in scaffolds (see scaffold.h), run against one sandbox and session.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "flotilla/worker/image_user.h"
#include "flotilla/worker/scaffold.h"

namespace flotilla::worker {

// The line a mini agent's command prints to end the episode.
inline constexpr char kMiniSubmit[] = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";

struct AgentContext {
  ChatService& service;
  SandboxClient& sandbox;
  const TerminalTask& task;
  const ScaffoldOptions& options;
  std::string session_id;
  std::string sandbox_id;
  int64_t deadline_ms = 0;            // on options.clock (monotonic)
  std::optional<ImageUser> user;      // the image's USER when not root: commands run as it
};

struct AgentOutcome {
  enum class End { kSubmitted, kStepLimit, kTimeout, kContextFull, kSandboxBroken };
  End end = End::kSubmitted;
  int steps = 0;
  int commands = 0;                   // commands run in the sandbox
  std::string detail;
  v1::StopReason repercussion = v1::STOP_REASON_NONE;
  int exit_code = 0;  // an agent CLI's exit status (not 0: the trial is an agent error)
  std::string output;  // an agent CLI's stdout and stderr
};

// Runs a command in the sandbox's /app with the time left before the deadline, as ctx.user.
absl::StatusOr<ExecOutcome> RunCommand(AgentContext& ctx, const std::string& command);
// "<returncode>..</returncode><output>..</output>", output cut to the options' limit.
std::string Observation(const ExecOutcome& out, uint32_t limit);

absl::StatusOr<AgentOutcome> RunSingleTurnAgent(AgentContext& ctx);
absl::StatusOr<AgentOutcome> RunMiniAgent(AgentContext& ctx);
absl::StatusOr<AgentOutcome> RunToolAgent(AgentContext& ctx);

}  // namespace flotilla::worker
