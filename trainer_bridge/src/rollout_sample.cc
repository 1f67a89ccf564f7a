#include "flotilla/trainer_bridge/rollout_sample.h"

#include <algorithm>

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
  }
  return absl::OkStatus();
}

int64_t RolloutSample::MinVersion() const {
  return versions.empty() ? 0 : *std::min_element(versions.begin(), versions.end());
}
int64_t RolloutSample::MaxVersion() const {
  return versions.empty() ? 0 : *std::max_element(versions.begin(), versions.end());
}

}  // namespace flotilla::trainer_bridge
