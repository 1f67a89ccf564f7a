// The single-turn agent: one reply to the instruction, written into the sandbox for the tests.
#include "flotilla/common/status.h"
#include "scaffold_agents.h"

namespace flotilla::worker {

absl::StatusOr<AgentOutcome> RunSingleTurnAgent(AgentContext& ctx) {
  ChatRequest req;
  req.session_id = ctx.session_id;
  req.system = ctx.options.system_prompt;  // single-turn has no scaffold text of its own
  req.max_tokens = ctx.options.max_tokens;
  req.ignore_stop = ctx.options.exact_tokens;
  req.temperature = ctx.options.temperature;
  req.seed = ctx.options.seed;
  ChatMessage task;
  task.role = ChatMessage::Role::kUser;
  task.content = ctx.task.instruction;
  req.messages.push_back(task);
  AgentOutcome outcome;
  absl::StatusOr<ChatReply> reply = ctx.service.Complete(req, nullptr);
  if (!reply.ok()) {
    if (reply.status().code() != absl::StatusCode::kInvalidArgument) return reply.status();
    outcome.end = AgentOutcome::End::kContextFull;
    outcome.detail = std::string(reply.status().message());
    return outcome;
  }
  outcome.steps = 1;
  RETURN_IF_ERROR(ctx.sandbox.PutFile(ctx.sandbox_id, kSingleTurnResponsePath, reply->text, 0644));
  outcome.end = AgentOutcome::End::kSubmitted;
  return outcome;
}

}  // namespace flotilla::worker
