#include "flotilla/worker/token_span.h"

namespace flotilla::worker {

void AppendContextTokens(v1::TokenSpan* span, absl::Span<const int32_t> ids) {
  for (int32_t id : ids) {
    span->add_ids(id);
    span->add_loss_mask(0);
    span->add_logprobs(0.0f);
    span->add_policy_versions(-1);
  }
}

void AppendGeneratedToken(v1::TokenSpan* span, int32_t id, float logprob, int64_t policy_version,
                          absl::Span<const int32_t> experts) {
  span->add_ids(id);
  span->add_loss_mask(1);
  span->add_logprobs(logprob);
  span->add_policy_versions(policy_version);
  span->mutable_experts()->Add(experts.begin(), experts.end());
}

void AppendGeneratedTokens(v1::TokenSpan* span, const std::vector<inference::TokenRecord>& tokens) {
  for (const inference::TokenRecord& t : tokens) {
    AppendGeneratedToken(span, t.token, t.logprob, t.policy_version, t.experts);
  }
}

}  // namespace flotilla::worker
