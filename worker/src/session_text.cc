// Session records of replies that came as text (an external endpoint): no token spans.
#include "flotilla/worker/session.h"
#include "session_internal.h"

namespace flotilla::worker {

const RecordedTurn& Session::CommitText(const std::vector<ChatMessage>& messages, std::string wire_text,
                                        std::vector<ToolCall> tool_calls, int64_t start_unix_ms,
                                        int64_t end_unix_ms) {
  int best = -1;
  size_t best_k = 0, partial_k = 0;
  for (size_t s = 0; s < segments_.size(); ++s) {
    size_t k = CommonPrefix(segments_[s], messages);
    if (k == segments_[s].turns.size() && messages.size() > k && (best < 0 || k > best_k)) {
      best = static_cast<int>(s);
      best_k = k;
    }
    partial_k = std::max(partial_k, k);
  }
  size_t first_new = 0;
  if (best >= 0) {
    first_new = best_k;
  } else {
    RecordedSegment seg;
    seg.reason = NewSegmentReason(segments_.empty(), partial_k, messages.size());
    segments_.push_back(std::move(seg));
    best = static_cast<int>(segments_.size()) - 1;
  }
  RecordedSegment& seg = segments_[static_cast<size_t>(best)];
  for (size_t i = first_new; i < messages.size(); ++i) {
    RecordedTurn t;
    t.message = messages[i];
    t.start_unix_ms = start_unix_ms;
    t.end_unix_ms = start_unix_ms;
    seg.turns.push_back(std::move(t));
  }
  RecordedTurn reply;
  reply.message.role = ChatMessage::Role::kAssistant;
  reply.message.content = std::move(wire_text);
  reply.message.tool_calls = std::move(tool_calls);
  reply.generated = true;
  reply.start_unix_ms = start_unix_ms;
  reply.end_unix_ms = end_unix_ms;
  seg.turns.push_back(std::move(reply));
  return seg.turns.back();
}

}  // namespace flotilla::worker
