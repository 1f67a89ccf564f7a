#include "flotilla/trainer_bridge/batch_figures.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace flotilla::trainer_bridge {

std::map<std::string, double> BatchFigures(const v1::Batch& batch, int64_t trainer_version) {
  std::map<std::string, double> out;
  const int n = batch.samples_size();
  out["samples"] = n;
  if (n == 0) return out;
  double reward_sum = 0, loss_tokens = 0, stale_loss_tokens = 0, lag_sum = 0, lag_max = 0;
  uint64_t lag_n = 0;
  std::map<std::string, std::pair<double, int>> by_dataset;
  std::map<std::string, std::set<float>> rewards_by_group;
  for (const v1::Sample& s : batch.samples()) {
    reward_sum += s.reward();
    auto& d = by_dataset[s.dataset()];
    d.first += s.reward();
    d.second += 1;
    rewards_by_group[s.group_id()].insert(s.reward());
    for (int t = 0; t < s.loss_mask_size(); ++t) {
      if (s.loss_mask(t) == 0) continue;
      loss_tokens += 1;
      // Per token: one turn may hold tokens of several versions (a switch mid-turn).
      if (t < s.policy_versions_size() && s.policy_versions(t) < trainer_version) stale_loss_tokens += 1;
    }
    for (int64_t v : s.policy_versions()) {
      if (v < 0) continue;
      const double lag = static_cast<double>(trainer_version - v);
      lag_sum += lag;
      lag_max = std::max(lag_max, lag);
      ++lag_n;
    }
  }
  int flat_groups = 0;
  for (const auto& [group, rewards] : rewards_by_group) flat_groups += rewards.size() == 1;
  out["groups"] = static_cast<double>(rewards_by_group.size());
  out["reward_mean"] = reward_sum / n;
  for (const auto& [dataset, d] : by_dataset) {
    if (!dataset.empty()) out["reward_mean/" + dataset] = d.first / d.second;
  }
  out["zero_variance_group_frac"] = static_cast<double>(flat_groups) / static_cast<double>(rewards_by_group.size());
  out["response_tokens_mean"] = loss_tokens / n;
  out["staleness_mean"] = lag_n ? lag_sum / static_cast<double>(lag_n) : 0;
  out["staleness_max"] = lag_max;
  out["stale_token_frac"] = loss_tokens > 0 ? stale_loss_tokens / loss_tokens : 0;
  const double all_loss = static_cast<double>(batch.total_loss_tokens());
  out["stale_masked_frac"] = all_loss > 0 ? batch.stale_masked_tokens() / all_loss : 0;
  return out;
}

}  // namespace flotilla::trainer_bridge
