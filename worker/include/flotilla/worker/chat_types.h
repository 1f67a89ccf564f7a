// The wire-neutral form of one chat request and its reply. Each wire API (OpenAI Chat
// Completions, OpenAI Responses, Anthropic Messages) parses into ChatRequest and renders a
// ChatReply; everything between (sessions, token bookkeeping, generation) sees only these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/inference/chat_template.h"
#include "flotilla/inference/engine.h"

namespace flotilla::worker {

using inference::ChatMessage;
using inference::ToolCall;
using inference::TokenRecord;

class HfChat;

// A function the scaffold offers the model.
struct ToolSpec {
  std::string name;
  std::string description;
  std::string parameters_json;  // a JSON schema object as text; "{}" when none
};

struct ChatRequest {
  std::string model;
  std::string system;                  // joined system/developer text; may be empty
  std::vector<ChatMessage> messages;   // user / assistant / tool turns, in order
  std::vector<ToolSpec> tools;
  float temperature = 1.0f;
  float top_p = 1.0f;
  std::optional<uint64_t> seed;
  uint32_t max_tokens = 256;
  bool ignore_stop = false;            // generate exactly max_tokens (benchmark workloads)
  bool logprobs = false;               // return per-token logprobs on the wire
  uint32_t top_logprobs = 0;
  bool stream = false;
  std::string session_id;              // explicit session binding; empty: match by prefix
  std::string previous_response_id;    // Responses API chaining
  std::string reply_id;                // the id the wire API gives the reply; empty: chosen here
  const HfChat* hf = nullptr;          // set by the wire layer: the model's tokenizer for token
                                       // texts on the wire; null: the byte model's
};

// Why generation stopped, in wire-neutral terms.
enum class StopKind { kEndTurn, kToolCalls, kMaxTokens, kInterrupted, kError };

struct ChatReply {
  std::string id;                      // the reply's own id (e.g. "msg_..."/"chatcmpl-...")
  std::string session_id;
  std::string text;                    // exactly the text sent on the wire (valid UTF-8)
  std::vector<ToolCall> tool_calls;
  std::vector<TokenRecord> tokens;     // every generated token, as the engine returned it
  StopKind stop = StopKind::kEndTurn;
  uint32_t prompt_tokens = 0;          // whole context before generation
  uint32_t reused_tokens = 0;          // of those, taken from the session's record
  uint32_t completion_tokens = 0;
  int64_t created_unix_s = 0;
};

// Receives a reply while it is generated. Called on the request's own thread.
class ReplyObserver {
 public:
  virtual ~ReplyObserver() = default;
  // Text that is final (will be part of ChatReply::text), with the tokens that produced it.
  virtual void OnTextDelta(std::string_view text, const std::vector<TokenRecord>& tokens) = 0;
};

// Valid UTF-8 with every invalid byte replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view bytes);
// Length of the longest prefix of `bytes` that ends on a complete UTF-8 sequence boundary,
// treating a trailing incomplete-but-valid-so-far sequence as not yet complete.
size_t CompleteUtf8Prefix(std::string_view bytes);

}  // namespace flotilla::worker
