#include "flotilla/trainer_bridge/rollout_sample.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace flotilla::trainer_bridge {

absl::Status RolloutSample::Append(const std::vector<inference::TokenRecord>& tokens) {
  for (const auto& t : tokens) {
    uint32_t width = static_cast<uint32_t>(t.experts.size());
    if (completion.empty()) routing_width = width;
    if (width != routing_width) {
      return absl::InvalidArgumentError(absl::StrCat("sample ", id, ": token ", completion.size(),
                                                     " has routing width ", width, ", expected ", routing_width));
    }
    // A new policy-version segment starts when the version differs from the last generated token's.
    size_t last = loss_mask.size();
    while (last > 0 && loss_mask[last - 1] == 0) --last;
    if (last == 0 || versions[last - 1] != t.policy_version) segments += 1;
    completion.push_back(t.token);
    loss_mask.push_back(1);
    logprobs.push_back(t.logprob);
    versions.push_back(t.policy_version);
    routing.insert(routing.end(), t.experts.begin(), t.experts.end());
  }
  return absl::OkStatus();
}

void RolloutSample::AppendContext(absl::Span<const int32_t> ids) {
  for (int32_t id : ids) {
    completion.push_back(id);
    loss_mask.push_back(0);
    logprobs.push_back(0.0f);
    versions.push_back(-1);
    routing.insert(routing.end(), routing_width, -1);
  }
}

uint32_t RolloutSample::GeneratedTokens() const {
  return static_cast<uint32_t>(std::count(loss_mask.begin(), loss_mask.end(), 1));
}

int64_t RolloutSample::MinVersion() const {
  int64_t v = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < versions.size(); ++i) {
    if (loss_mask[i] != 0) v = std::min(v, versions[i]);
  }
  return v == std::numeric_limits<int64_t>::max() ? 0 : v;
}
int64_t RolloutSample::MaxVersion() const {
  int64_t v = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < versions.size(); ++i) {
    if (loss_mask[i] != 0) v = std::max(v, versions[i]);
  }
  return v == std::numeric_limits<int64_t>::min() ? 0 : v;
}

}  // namespace flotilla::trainer_bridge
