// Helpers shared by session.cc (the record) and session_hf.cc (its Hugging Face template path).
#pragma once

#include <cstdint>
#include <vector>

#include "flotilla/worker/session.h"

namespace flotilla::worker {

// How many leading turns of `seg` the messages repeat (SameMessage).
size_t CommonPrefix(const RecordedSegment& seg, const std::vector<ChatMessage>& messages);

}  // namespace flotilla::worker
