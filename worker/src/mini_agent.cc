// The mini-SWE style agent: one fenced bash block per turn.
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "scaffold_agents.h"

namespace flotilla::worker {
namespace {

constexpr char kSubmit[] = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";

constexpr char kSystem[] =
    "You are a helpful assistant that can interact with a computer shell to solve programming "
    "tasks. Your response must contain exactly ONE bash code block with ONE command (or commands "
    "connected with && or ||), preceded by a THOUGHT section explaining your reasoning:\n\n"
    "THOUGHT: ...\n\n```bash\nyour_command_here\n```\n\n"
    "Every command runs in a new shell in /app; directory or environment changes do not persist. "
    "When the task is done and you cannot make further progress, run:\n\n"
    "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```";

}  // namespace

MiniAction ParseMiniAction(const std::string& text) {
  static const std::regex kBlock("```bash\\s*\\n([\\s\\S]*?)\\n```");
  MiniAction a;
  std::vector<std::string> blocks;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kBlock); it != std::sregex_iterator(); ++it) {
    blocks.push_back((*it)[1].str());
  }
  if (blocks.size() != 1) {
    a.error = absl::StrCat(
        "Please always provide EXACTLY ONE action in triple backticks, found ", blocks.size(),
        " actions.\nIf you have completed your assignment, run:\n```bash\necho ", kSubmit, "\n```");
    return a;
  }
  a.ok = true;
  a.command = blocks[0];
  return a;
}

absl::StatusOr<AgentOutcome> RunMiniAgent(AgentContext& ctx) {
  ChatRequest req;
  req.session_id = ctx.session_id;
  req.system = SystemText(ctx, kSystem);
  req.ignore_stop = ctx.options.exact_tokens;
  req.max_tokens = ctx.options.max_tokens;
  req.temperature = ctx.options.temperature;
  req.seed = ctx.options.seed;
  ChatMessage task;
  task.role = ChatMessage::Role::kUser;
  task.content = absl::StrCat("Please solve this task:\n\n", ctx.task.instruction);
  req.messages.push_back(task);
  AgentOutcome outcome;
  for (uint32_t step = 0; step < ctx.options.max_steps; ++step) {
    if (ctx.options.clock->NowMillis() >= ctx.deadline_ms) {
      outcome.end = AgentOutcome::End::kTimeout;
      outcome.steps = static_cast<int>(step);
      return outcome;
    }
    if (req.seed.has_value()) req.seed = *ctx.options.seed + step;
    absl::StatusOr<ChatReply> reply = ctx.service.Complete(req, nullptr);
    if (!reply.ok()) {
      if (reply.status().code() == absl::StatusCode::kInvalidArgument) {
        outcome.end = AgentOutcome::End::kContextFull;
        outcome.detail = std::string(reply.status().message());
        outcome.steps = static_cast<int>(step);
        return outcome;
      }
      return reply.status();
    }
    ChatMessage said;
    said.role = ChatMessage::Role::kAssistant;
    said.content = reply->text;
    said.tool_calls = reply->tool_calls;
    req.messages.push_back(said);
    outcome.steps = static_cast<int>(step + 1);
    MiniAction action = ParseMiniAction(reply->text);
    ChatMessage next;
    next.role = ChatMessage::Role::kUser;
    if (!action.ok) {
      next.content = action.error;
      req.messages.push_back(next);
      continue;
    }
    ASSIGN_OR_RETURN(ExecOutcome out, RunCommand(ctx, action.command));
    outcome.commands += 1;
    if (out.reason == v1::SANDBOX_BROKEN || out.reason == v1::SANDBOX_DIED) {
      outcome.end = AgentOutcome::End::kSandboxBroken;
      outcome.repercussion = out.reason;
      outcome.detail = out.detail;
      return outcome;
    }
    std::string first_line = out.output.substr(0, out.output.find('\n'));
    if (absl::StripAsciiWhitespace(first_line) == kSubmit) {
      outcome.end = AgentOutcome::End::kSubmitted;
      return outcome;
    }
    next.content = Observation(out, ctx.options.output_limit_bytes);
    req.messages.push_back(next);
  }
  outcome.end = AgentOutcome::End::kStepLimit;
  return outcome;
}

}  // namespace flotilla::worker
