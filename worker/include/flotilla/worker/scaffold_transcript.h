// What a built-in scaffold (scaffold.h) says to the model, as data: the request its first turn
// sends, and the whole conversation it records when the model's replies are the task's
// reference steps (commands whose outputs are known in advance). A supervised warm start trains
// on the latter, so the model learns the format of a whole multi-turn episode (the tool call, reading the tool's
// output, the final action) in exactly the tokens the scaffold will later feed and record.
//
//   mini      step i is the reply "```bash\n<command>\n```"; the observation
//             "<returncode>E</returncode>\n<output>\n<output></output>" is the next user turn.
//             The last step's reply runs "<command> && echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
//             which ends the episode: no observation follows it.
//   terminal  step i is a reply calling `bash` with {"command": <command>}; its result is the
//             next tool turn. The last reply calls `bash`, then `submit`, which ends the episode.
//
// The tokens are the byte model's chat format (inference/chat_template.h) as ChatService renders
// and records it: when a model generates exactly the reference replies, the session's trajectory
// holds exactly these tokens. A Hugging Face chat template is not covered.
//
// Thread-safe (stateless).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/worker/chat_types.h"
#include "flotilla/worker/scaffold.h"
#include "flotilla/worker/terminal_task.h"

namespace flotilla::worker {

// The request the first turn of scaffold options.scaffold sends: its system text (after
// options.system_prompt and a blank line, when that is set), its tools and the task's user turn;
// options.system_template and options.instance_template replace the scaffold's own texts when
// set. Sampling fields and the session are left at their defaults. InvalidArgument for a
// scaffold other than mini or terminal, or an instance_template without "{{task}}".
absl::StatusOr<ChatRequest> ScaffoldOpening(const TerminalTask& task, const ScaffoldOptions& options);

// The conversation (system turn first, as ChatService::PromptMessages gives it) recorded when the
// model's replies are task.reference_steps, in order (see the file comment). Uses
// options.scaffold and options.output_limit_bytes. FailedPrecondition when the task has no
// reference steps; InvalidArgument naming the step for a command that is empty or holds "```".
absl::StatusOr<std::vector<ChatMessage>> ReferenceConversation(const TerminalTask& task,
                                                               const ScaffoldOptions& options);

// One supervised example per assistant turn of the reference conversation: `prompt` is the
// rendered context before the turn, ending with <assistant> (what the engine is fed), `target`
// the turn's generated tokens through <end>.
struct TurnExample {
  std::vector<int32_t> prompt;
  std::vector<int32_t> target;
};
absl::StatusOr<std::vector<TurnExample>> ReferenceTurnExamples(const TerminalTask& task,
                                                               const ScaffoldOptions& options);

// The whole reference conversation as one token sequence with a mask: generated[i] is 1 on the
// tokens the model produces (each assistant turn's content and its <end>), 0 on everything the
// scaffold or the sandbox supplies (system, user and tool turns, the <assistant> role token).
struct ReferenceTokens {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> generated;
};
absl::StatusOr<ReferenceTokens> ReferenceTrajectoryTokens(const TerminalTask& task,
                                                          const ScaffoldOptions& options);

}  // namespace flotilla::worker
