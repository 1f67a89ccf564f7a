// Training records from stored trajectories, for `flotilla trajectories export --format`:
//
//   sft  one JSON object per segment that holds a reply, the conversation as chat messages
//        (OpenAI's shape: role, content, tool_calls, tool_call_id) and, where the segment has
//        its token record, the exact ids with the loss mask (1 on the model's tokens):
//          {"id", "segment", "task", "scaffold", "reward", "status", "messages": [...],
//           "input_ids": [...], "loss_mask": [...]}
//   rl   one JSON object per segment with a token record, flat per token (the trainer's view):
//          {"id", "segment", "task", "scaffold", "group_id", "effort", "reward", "status",
//           "input_ids", "loss_mask", "logprobs", "policy_versions"}
//        A trajectory recorded as text only (an external endpoint) gives no rl record.
//
// status is the trajectory's status name without its prefix ("OK", "FAILED", ...). Ids are
// never re-tokenized: they are the segment's turns' spans, concatenated in order.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/proto/trajectory.pb.h"
#include "nlohmann/json.hpp"

namespace flotilla::eval {

enum class TrainingFormat { kSft, kRl };

// "sft" or "rl"; InvalidArgument naming the format otherwise.
absl::StatusOr<TrainingFormat> ParseTrainingFormat(const std::string& name);

// The trajectory's records in `format`, one per qualifying segment, in segment order.
std::vector<nlohmann::json> TrainingRecords(const v1::Trajectory& trajectory, TrainingFormat format);

}  // namespace flotilla::eval
