// The one token bookkeeping of a trajectory's turns: how token ids go into a TokenSpan, for a
// worker session's turns and the trainer bridge's single-turn samples alike. Context tokens
// (prompts, tool output, template tokens) carry loss mask 0, logprob 0 and policy version -1;
// tokens the model generated carry loss mask 1 and the engine's logprob, policy version and
// expert routing (experts_per_token ids each, appended exactly as the engine emitted them).
//
// Plain functions over the caller's span; thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "flotilla/inference/engine.h"
#include "flotilla/proto/trajectory.pb.h"

namespace flotilla::worker {

// Appends context tokens (never trained on).
void AppendContextTokens(v1::TokenSpan* span, absl::Span<const int32_t> ids);
// Appends one generated token with its routing row (the caller keeps rows of one width:
// RolloutSample::Append checks what the engine delivers).
void AppendGeneratedToken(v1::TokenSpan* span, int32_t id, float logprob, int64_t policy_version,
                          absl::Span<const int32_t> experts);
// Appends the engine's records of generated tokens.
void AppendGeneratedTokens(v1::TokenSpan* span, const std::vector<inference::TokenRecord>& tokens);

}  // namespace flotilla::worker
