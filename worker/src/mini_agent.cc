// The mini-SWE style agent: one fenced bash block per turn.
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/worker/scaffold_transcript.h"
#include "scaffold_agents.h"

namespace flotilla::worker {

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
        " actions.\nIf you have completed your assignment, run:\n```bash\necho ", kMiniSubmit, "\n```");
    return a;
  }
  a.ok = true;
  a.command = blocks[0];
  return a;
}

absl::StatusOr<AgentOutcome> RunMiniAgent(AgentContext& ctx) {
  ASSIGN_OR_RETURN(ChatRequest req, ScaffoldOpening(ctx.task, ctx.options));
  req.session_id = ctx.session_id;
  req.ignore_stop = ctx.options.exact_tokens;
  req.max_tokens = ctx.options.max_tokens;
  req.temperature = ctx.options.temperature;
  req.seed = ctx.options.seed;
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
    if (absl::StripAsciiWhitespace(first_line) == kMiniSubmit) {
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
