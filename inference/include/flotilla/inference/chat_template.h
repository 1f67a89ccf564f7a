// The one chat template, shared by every wire API and scaffold.
//
//   <bos> then per message: <role-token> content-bytes <end>
//   an assistant message's tool calls follow its text, each as
//     <tool_call> {"name": ..., "arguments": {...}} </tool_call>
//   a tool result is a <tool> turn whose content is the result text.
//   Generation starts after <assistant>; it stops at <end> or <eos>.
//
// Thread-safe (stateless).
#pragma once

#include <string>
#include <vector>

#include "flotilla/inference/tokenizer.h"

namespace flotilla::inference {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;  // a JSON object as text
};

struct ChatMessage {
  enum class Role { kSystem, kUser, kAssistant, kTool };
  Role role = Role::kUser;
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant only
  std::string tool_call_id;          // tool only
};

// Tokens of one message (role token through <end>), without <bos>.
std::vector<int32_t> RenderMessage(const ChatMessage& m);
// <bos> + every message + (if add_generation_prompt) <assistant>.
std::vector<int32_t> RenderConversation(const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt);

// Parses what the model generated after <assistant> (up to, not including, <end>/<eos>) into
// text and tool calls. Malformed tool-call blocks stay in the text: never an error.
struct ParsedReply {
  std::string text;
  std::vector<ToolCall> tool_calls;
};
ParsedReply ParseAssistantReply(const std::vector<int32_t>& generated);

}  // namespace flotilla::inference
