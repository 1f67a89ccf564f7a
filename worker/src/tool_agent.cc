// The Terminal-Bench style agent: the model calls a `bash` tool and finishes with `submit`.
#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/worker/scaffold_transcript.h"
#include "nlohmann/json.hpp"
#include "scaffold_agents.h"

namespace flotilla::worker {

absl::StatusOr<AgentOutcome> RunToolAgent(AgentContext& ctx) {
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
      return outcome;
    }
    if (req.seed.has_value()) req.seed = *ctx.options.seed + step;
    absl::StatusOr<ChatReply> reply = ctx.service.Complete(req, nullptr);
    if (!reply.ok()) {
      if (reply.status().code() == absl::StatusCode::kInvalidArgument) {
        outcome.end = AgentOutcome::End::kContextFull;
        outcome.detail = std::string(reply.status().message());
        return outcome;
      }
      return reply.status();
    }
    outcome.steps = static_cast<int>(step + 1);
    ChatMessage said;
    said.role = ChatMessage::Role::kAssistant;
    said.content = reply->text;
    said.tool_calls = reply->tool_calls;
    req.messages.push_back(said);
    if (reply->tool_calls.empty()) {
      ChatMessage nudge;
      nudge.role = ChatMessage::Role::kUser;
      nudge.content = "Use the bash tool to act, or call submit when the task is complete.";
      req.messages.push_back(nudge);
      continue;
    }
    for (const ToolCall& call : reply->tool_calls) {
      ChatMessage result;
      result.role = ChatMessage::Role::kTool;
      result.tool_call_id = call.id;
      if (call.name == "submit") {
        outcome.end = AgentOutcome::End::kSubmitted;
        return outcome;
      }
      auto args = nlohmann::json::parse(call.arguments_json, nullptr, false);
      if (call.name != "bash" || !args.is_object() || !args.contains("command") || !args["command"].is_string()) {
        result.content = absl::StrCat("error: unknown tool '", call.name,
                                      "' or missing string argument 'command'");
        req.messages.push_back(result);
        continue;
      }
      ASSIGN_OR_RETURN(ExecOutcome out, RunCommand(ctx, args["command"].get<std::string>()));
      outcome.commands += 1;
      if (out.reason == v1::SANDBOX_BROKEN || out.reason == v1::SANDBOX_DIED) {
        outcome.end = AgentOutcome::End::kSandboxBroken;
        outcome.repercussion = out.reason;
        outcome.detail = out.detail;
        return outcome;
      }
      result.content = Observation(out, ctx.options.output_limit_bytes);
      req.messages.push_back(result);
    }
  }
  outcome.end = AgentOutcome::End::kStepLimit;
  return outcome;
}

}  // namespace flotilla::worker
