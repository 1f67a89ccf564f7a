// Session: the exact token record of one scaffold conversation.
//
// A scaffold re-sends its whole conversation on every request. The session matches the
// incoming messages against what it has recorded and reuses the recorded token ids for the
// known prefix; only new messages (user turns, tool results) are tokenized, and the model's
// own replies keep the ids, logprobs, expert routing and policy versions the engine returned.
// A request that does not extend a recorded segment (history compacted, truncated or edited)
// opens a new segment whose reason says so; it still reuses the recorded ids of the turns it
// shares with an earlier segment, so no token is ever re-tokenized.
//
// With a Hugging Face chat (HfChat) the record is kept against the model's chat template: a
// segment remembers the template's text for its turns (`rendered`); new messages are the
// template's text for the whole conversation minus that, tokenized per message; the reply turn
// holds the generation prompt, the generated ids exactly as the engine returned them, then the
// text the template closes an assistant turn with. A conversation the template renders
// differently from the record (it rewrote earlier turns) opens a new segment, prefilled from
// the template's text.
//
// Thread-safety: not thread-safe; the SessionRegistry serializes access per session.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/proto/trajectory.pb.h"
#include "flotilla/worker/chat_types.h"
#include "flotilla/worker/token_generator.h"
#include "nlohmann/json.hpp"

namespace flotilla::worker {

class HfChat;

struct RecordedTurn {
  ChatMessage message;        // canonical; an assistant reply holds its wire text
  bool generated = false;     // an assistant reply produced by the model in this session
  v1::TokenSpan tokens;
  int64_t start_unix_ms = 0;
  int64_t end_unix_ms = 0;
  size_t rendered_end = 0;    // HfChat: length of the segment's template text through this turn
};

struct RecordedSegment {
  std::string reason;
  std::vector<RecordedTurn> turns;
  std::string sequence_id;    // the engine sequence that holds this segment; "" if none
  size_t engine_tokens = 0;   // how many of the segment's tokens that sequence holds
  std::string rendered;       // HfChat: the template's text the segment's tokens stand for
  size_t TokenCount() const;
  std::vector<int32_t> TokenIds() const;
};

// What one request will do to the record: computed without changing it.
struct TurnPlan {
  int segment = -1;                    // segment to extend; -1: open a new one
  std::string new_segment_reason;
  int source_segment = -1;             // for a new segment: whose turns it starts with
  size_t kept_turns = 0;               // how many turns of source_segment it reuses
  std::vector<RecordedTurn> new_turns; // newly tokenized messages (loss mask 0)
  GenerationCall call;                 // what to ask the engine for
  uint32_t context_tokens = 0;         // whole context incl. the assistant role token
  uint32_t reused_tokens = 0;          // context tokens taken from the record
  // HfChat only: the conversation as the template rendered it (recorded turns, then the new
  // messages), the tools it was given, and the generation prompt (text and ids).
  std::vector<ChatMessage> conversation;
  nlohmann::ordered_json tools;
  std::string generation_prompt;
  std::string prompt_text;             // the whole prompt's text
  std::vector<int32_t> reply_head;
};

class Session {
 public:
  // `hf` (nullable, borrowed): render through that model's chat template and tokenizer.
  Session(std::string id, int32_t experts_per_token, const HfChat* hf = nullptr);

  const std::string& id() const { return id_; }

  // How many recorded turns of the best-matching segment `messages` extend (the whole
  // segment must match, and `messages` must add at least one message); 0 if none.
  size_t ExtendsBy(const std::vector<ChatMessage>& messages) const;

  // Plans a reply to `messages` (the full conversation, system message first if any);
  // `tools` (HfChat only) go to the template. InvalidArgument when the template fails.
  absl::StatusOr<TurnPlan> Plan(const std::vector<ChatMessage>& messages,
                                const nlohmann::ordered_json& tools, int64_t now_unix_ms) const;

  // Records the plan and the model's reply. Returns the assistant turn as recorded.
  const RecordedTurn& Commit(TurnPlan plan, const GenerationOutcome& outcome,
                             std::string wire_text, std::vector<ToolCall> tool_calls,
                             int64_t start_unix_ms, int64_t end_unix_ms);

  // Records a reply that came as text (an external endpoint, remote_chat.h): the messages the
  // best-matching segment lacks, then the reply, as turns without token spans. A conversation
  // that extends no segment opens one (its reason as for tokens). Returns the reply turn.
  const RecordedTurn& CommitText(const std::vector<ChatMessage>& messages, std::string wire_text,
                                 std::vector<ToolCall> tool_calls, int64_t start_unix_ms, int64_t end_unix_ms);

  // The engine lost or failed the plan's sequence: forget it so the next plan prefills anew.
  void ForgetSequence(const TurnPlan& plan);

  const std::vector<RecordedSegment>& segments() const { return segments_; }
  // Every engine sequence this session holds (to release on close).
  std::vector<std::string> SequenceIds() const;

  // The normalized trajectory (segments, turns, per-token data) with the given header.
  v1::Trajectory ToTrajectory(const v1::Trajectory& header) const;

 private:
  TurnPlan PlanBytes(const std::vector<ChatMessage>& messages, int64_t now_unix_ms) const;
  absl::StatusOr<TurnPlan> PlanHf(const std::vector<ChatMessage>& messages,
                                  const nlohmann::ordered_json& tools, int64_t now_unix_ms) const;
  // The reply turn's closing ids and the segment's new template text (HfChat).
  void CloseHfReply(const TurnPlan& plan, const GenerationOutcome& outcome, RecordedSegment* seg,
                    RecordedTurn* reply) const;

  std::string id_;
  int32_t experts_per_token_;
  const HfChat* hf_;
  std::vector<RecordedSegment> segments_;
};

// True when an incoming message is the recorded turn (see session.cc for the rules).
bool SameMessage(const ChatMessage& incoming, const RecordedTurn& recorded);

}  // namespace flotilla::worker
