#include "flotilla/trainer_bridge/rollout_sample.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace flotilla::trainer_bridge {

absl::Status RolloutSample::Append(const std::vector<inference::TokenRecord>& tokens) {
  for (const auto& t : tokens) {
    uint32_t width = static_cast<uint32_t>(t.experts.size());
    if (completion.empty() && routing.empty()) routing_width = width;
    if (width != routing_width) {
      return absl::InvalidArgumentError(absl::StrCat("sample ", id, ": token ", completion.size(),
                                                     " has routing width ", width, ", expected ", routing_width));
    }
    completion.push_back(t.token);
    logprobs.push_back(t.logprob);
    versions.push_back(t.policy_version);
    routing.insert(routing.end(), t.experts.begin(), t.experts.end());
    if (!generated.empty()) generated.push_back(1);
  }
  return absl::OkStatus();
}

void RolloutSample::AppendContext(const std::vector<int32_t>& ids) {
  if (completion.empty()) {
    prompt.insert(prompt.end(), ids.begin(), ids.end());
    return;
  }
  if (generated.empty()) generated.assign(completion.size(), 1);
  for (int32_t token : ids) {
    completion.push_back(token);
    logprobs.push_back(0.0f);
    versions.push_back(-1);
    routing.insert(routing.end(), routing_width, -1);
    generated.push_back(0);
  }
}

uint32_t RolloutSample::GeneratedTokens() const {
  if (generated.empty()) return static_cast<uint32_t>(completion.size());
  return static_cast<uint32_t>(std::count(generated.begin(), generated.end(), uint8_t{1}));
}

int64_t RolloutSample::MinVersion() const {
  int64_t lo = std::numeric_limits<int64_t>::max();
  for (size_t t = 0; t < versions.size(); ++t) {
    if (IsGenerated(t)) lo = std::min(lo, versions[t]);
  }
  return lo == std::numeric_limits<int64_t>::max() ? 0 : lo;
}
int64_t RolloutSample::MaxVersion() const {
  int64_t hi = std::numeric_limits<int64_t>::min();
  for (size_t t = 0; t < versions.size(); ++t) {
    if (IsGenerated(t)) hi = std::max(hi, versions[t]);
  }
  return hi == std::numeric_limits<int64_t>::min() ? 0 : hi;
}

}  // namespace flotilla::trainer_bridge
