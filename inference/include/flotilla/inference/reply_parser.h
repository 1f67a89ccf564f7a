// Splits what a real model generates, streamed as text deltas, into content, reasoning and
// tool calls, per model family:
//   Hermes / Qwen       <tool_call>{"name": ..., "arguments": {...}}</tool_call>
//   Qwen3-Coder         <tool_call><function=NAME><parameter=P>value</parameter>...</function></tool_call>
//   DeepSeek-V3         <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//                       ```json {...} ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// and <think>...</think> as reasoning. Newlines that the chat template writes back around
// the parts are dropped, so that rendering the parsed message gives the model's text again:
// reasoning.strip('\n'), content.lstrip('\n') after </think>, and the newlines between
// content and a tool call.
//
// Streaming-safe: text that might be the start of a marker is held back until the next delta
// decides it, so no delta ever carries part of a marker, and a tool call comes out whole once
// its closing marker arrives. A block that does not parse (bad JSON, no name) comes out as
// content, markers included; so does a block still open at Finish(). Feeding any split of a
// text gives the same concatenated result as feeding it at once.
//
// Not thread-safe: one parser per generated reply.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/inference/chat_template.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference {

enum class ToolCallFormat { kNone, kHermes, kQwen3Coder, kDeepSeekV3 };

struct ReplyParserOptions {
  ToolCallFormat format = ToolCallFormat::kHermes;
  bool parse_think = true;           // split <think>...</think> into reasoning
  bool starts_in_reasoning = false;  // the prompt ended inside <think>: reasoning until </think>
  // Qwen3-Coder: the request's tools, whose parameter schemas type the values
  // (integer, number, boolean, object, array); without a schema a value stays a string.
  nlohmann::ordered_json tools = nullptr;
};

struct ReplyDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;  // ids "call_<n>", n counting this reply's calls
};

class ReplyParser {
 public:
  explicit ReplyParser(ReplyParserOptions options);

  // Takes the next piece of generated text; returns what it now knows for certain.
  ReplyDelta Feed(std::string_view delta);
  // The end of generation: everything still held back.
  ReplyDelta Finish();

 private:
  enum class State { kContent, kReasoning, kToolBlock };

  void Process(bool final, ReplyDelta& out);
  bool ProcessContent(bool final, ReplyDelta& out);
  bool ProcessReasoning(bool final, ReplyDelta& out);
  bool ProcessToolBlock(bool final, ReplyDelta& out);
  // What happens to a run of newlines at the end of emitted content: out now, held until the
  // next text decides, or dropped because a tool-call block follows (Qwen's template writes
  // that newline itself; it comes back if the block turns out malformed).
  enum class Tail { kFlush, kHold, kDrop };
  void EmitContent(std::string_view text, Tail tail, ReplyDelta& out);
  std::string BlockHead();  // the opening marker (and the newlines before it) of a block shown as text
  void EmitReasoning(std::string_view text, bool closing, ReplyDelta& out);
  void AddCall(ToolCall call, ReplyDelta& out);

  ReplyParserOptions options_;
  std::string open_marker_;   // a tool-call block's opening marker; empty: none
  std::string close_marker_;
  State state_ = State::kContent;
  std::string buffer_;             // received, not yet emitted
  std::string held_newlines_;      // reasoning newlines that may turn out to precede </think>
  std::string held_content_newlines_;  // content newlines that may turn out to precede a tool call
  std::string dropped_newlines_;       // the newlines before the open block
  bool strip_leading_newlines_ = false;    // just after <think> or </think>
  bool strip_leading_whitespace_ = false;  // just after a tool call
  int calls_ = 0;
  int block_calls_ = 0;  // calls (or malformed ones shown as content) in the open block
};

// The format a chat template's own text asks for: DeepSeek-V3's tool-call tokens, Qwen3-Coder's
// <function=...>, else Hermes <tool_call>; kNone for a template without tool calls.
ToolCallFormat DetectToolCallFormat(std::string_view chat_template_source);

}  // namespace flotilla::inference
