// The built-in scaffolds' prompts, and reference conversations rendered from them.
#include "flotilla/worker/scaffold_transcript.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/chat_template.h"
#include "flotilla/worker/chat_service.h"
#include "nlohmann/json.hpp"
#include "scaffold_agents.h"

namespace flotilla::worker {
namespace {

constexpr char kTaskPlaceholder[] = "{{task}}";

constexpr char kMiniSystem[] =
    "You are a helpful assistant that can interact with a computer shell to solve programming "
    "tasks. Your response must contain exactly ONE bash code block with ONE command (or commands "
    "connected with && or ||), preceded by a THOUGHT section explaining your reasoning:\n\n"
    "THOUGHT: ...\n\n```bash\nyour_command_here\n```\n\n"
    "Every command runs in a new shell in /app; directory or environment changes do not persist. "
    "When the task is done and you cannot make further progress, run:\n\n"
    "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```";

constexpr char kTerminalSystem[] =
    "You are an AI agent working in a Linux terminal inside /app. Use the bash tool to run "
    "commands and inspect their output. When the task is complete, call the submit tool.";

std::vector<ToolSpec> TerminalTools() {
  return {
      {"bash", "Run a bash command in /app and return its exit code and output.",
       R"({"type":"object","properties":{"command":{"type":"string"}},"required":["command"]})"},
      {"submit", "Finish: the task is complete.", R"({"type":"object","properties":{}})"},
  };
}

ToolCall Call(size_t index, const std::string& name, const nlohmann::json& args) {
  return ToolCall{absl::StrCat("call_", index), name, args.dump()};
}

}  // namespace

absl::StatusOr<ChatRequest> ScaffoldOpening(const TerminalTask& task, const ScaffoldOptions& options) {
  const std::string& scaffold = options.scaffold;
  ChatRequest req;
  ChatMessage user;
  user.role = ChatMessage::Role::kUser;
  std::string own;
  std::string instance;
  if (scaffold == "mini") {
    own = kMiniSystem;
    instance = "Please solve this task:\n\n{{task}}";
  } else if (scaffold == "terminal") {
    own = kTerminalSystem;
    req.tools = TerminalTools();
    instance = "{{task}}";
  } else {
    return absl::InvalidArgumentError(absl::StrCat("scaffold: unknown '", scaffold, "' (built in: mini, terminal)"));
  }
  if (!options.system_template.empty()) own = options.system_template;
  if (!options.instance_template.empty()) instance = options.instance_template;
  if (instance.find(kTaskPlaceholder) == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("instance_template: must contain ", kTaskPlaceholder));
  }
  user.content = absl::StrReplaceAll(instance, {{kTaskPlaceholder, task.instruction}});
  req.system = options.system_prompt.empty() ? own : absl::StrCat(options.system_prompt, "\n\n", own);
  req.messages.push_back(std::move(user));
  return req;
}

absl::StatusOr<std::vector<ChatMessage>> ReferenceConversation(const TerminalTask& task,
                                                               const ScaffoldOptions& options) {
  ASSIGN_OR_RETURN(ChatRequest req, ScaffoldOpening(task, options));
  const std::vector<ReferenceStep>& steps = task.reference_steps;
  if (steps.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("task ", task.name, ": no reference steps"));
  }
  const bool mini = options.scaffold == "mini";
  for (size_t i = 0; i < steps.size(); ++i) {
    const ReferenceStep& step = steps[i];
    if (step.command.empty() || step.command.find("```") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("task ", task.name, ": reference_steps[", i,
                                                     "].command: must be non-empty and hold no ```"));
    }
    const bool last = i + 1 == steps.size();
    ChatMessage said;
    said.role = ChatMessage::Role::kAssistant;
    if (mini) {
      said.content = absl::StrCat("```bash\n", step.command, last ? absl::StrCat(" && echo ", kMiniSubmit) : "", "\n```");
    } else {
      said.tool_calls.push_back(Call(0, "bash", nlohmann::json{{"command", step.command}}));
      if (last) said.tool_calls.push_back(Call(1, "submit", nlohmann::json::object()));
    }
    req.messages.push_back(std::move(said));
    if (last) break;
    ExecOutcome out;
    out.exit_code = step.exit_code;
    out.output = step.output;
    ChatMessage seen;
    seen.role = mini ? ChatMessage::Role::kUser : ChatMessage::Role::kTool;
    if (!mini) seen.tool_call_id = "call_0";
    seen.content = Observation(out, options.output_limit_bytes);
    req.messages.push_back(std::move(seen));
  }
  return ChatService::PromptMessages(req);
}

absl::StatusOr<std::vector<TurnExample>> ReferenceTurnExamples(const TerminalTask& task,
                                                               const ScaffoldOptions& options) {
  ASSIGN_OR_RETURN(std::vector<ChatMessage> conversation, ReferenceConversation(task, options));
  std::vector<TurnExample> out;
  for (size_t i = 0; i < conversation.size(); ++i) {
    if (conversation[i].role != ChatMessage::Role::kAssistant) continue;
    TurnExample ex;
    ex.prompt = inference::RenderConversation({conversation.begin(), conversation.begin() + i},
                                              /*add_generation_prompt=*/true);
    std::vector<int32_t> turn = inference::RenderMessage(conversation[i]);
    ex.target.assign(turn.begin() + 1, turn.end());  // after the <assistant> the prompt ends with
    out.push_back(std::move(ex));
  }
  return out;
}

absl::StatusOr<ReferenceTokens> ReferenceTrajectoryTokens(const TerminalTask& task,
                                                          const ScaffoldOptions& options) {
  ASSIGN_OR_RETURN(std::vector<ChatMessage> conversation, ReferenceConversation(task, options));
  ReferenceTokens out;
  out.tokens = inference::RenderConversation({}, /*add_generation_prompt=*/false);
  out.generated.assign(out.tokens.size(), 0);
  for (const ChatMessage& m : conversation) {
    std::vector<int32_t> turn = inference::RenderMessage(m);
    const bool assistant = m.role == ChatMessage::Role::kAssistant;
    for (size_t j = 0; j < turn.size(); ++j) {
      out.tokens.push_back(turn[j]);
      out.generated.push_back(assistant && j > 0 ? 1 : 0);
    }
  }
  return out;
}

}  // namespace flotilla::worker
