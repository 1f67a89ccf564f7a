// Helpers shared by session.cc (the record) and session_hf.cc (its Hugging Face template path).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flotilla/worker/session.h"

namespace flotilla::worker {

// Why a turn starts a new segment: "start", "new-conversation" (no turn repeated),
// "history-truncated" (all messages repeat turns, fewer than recorded) or "history-rewritten".
std::string NewSegmentReason(bool first_segment, size_t partial_k, size_t messages);
// A new segment that starts with the first `kept` (> 0) turns of `source`: records them in
// `plan` and appends their ids to `context`.
void StartFromTurns(const RecordedSegment& source, int source_index, size_t kept, TurnPlan* plan,
                    std::vector<int32_t>* context);
// How many leading turns of `seg` the messages repeat (SameMessage).
size_t CommonPrefix(const RecordedSegment& seg, const std::vector<ChatMessage>& messages);

}  // namespace flotilla::worker
