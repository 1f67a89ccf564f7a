#include "flotilla/trainer_bridge/advantages.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace flotilla::trainer_bridge {

double EffortPenaltyScale(const EffortConfig& effort, uint32_t b) {
  double b_min = 1;
  if (!effort.levels.empty()) b_min = *std::min_element(effort.levels.begin(), effort.levels.end());
  return effort.k0 * std::exp(-(static_cast<double>(b) - b_min) / effort.tau);
}

double LengthPenalty(const EffortConfig& effort, uint32_t b, uint32_t length) {
  if (b == 0 || effort.k0 <= 0 || effort.levels.empty()) return 0.0;
  double k = EffortPenaltyScale(effort, b);
  return -std::min(effort.c_max, k * static_cast<double>(length) / effort.l_norm);
}

std::vector<double> GroupAdvantages(const std::vector<AdvantageInput>& group,
                                    const AdvantageOptions& options) {
  std::vector<double> total(group.size());
  std::map<uint32_t, std::vector<size_t>> subgroups;
  for (size_t i = 0; i < group.size(); ++i) {
    total[i] = group[i].reward + LengthPenalty(options.effort, group[i].effort, group[i].length);
    subgroups[group[i].effort].push_back(i);
  }
  std::vector<double> adv(group.size(), 0.0);
  for (const auto& [effort, members] : subgroups) {
    double mean = 0;
    for (size_t i : members) mean += total[i];
    mean /= static_cast<double>(members.size());
    double var = 0;
    for (size_t i : members) var += (total[i] - mean) * (total[i] - mean);
    double std = std::sqrt(var / static_cast<double>(members.size()));
    for (size_t i : members) {
      double a = total[i] - mean;
      if (options.std_scaling) a = std < options.eps ? 0.0 : a / std;
      adv[i] = a;
    }
  }
  return adv;
}

std::string EffortPromptLine(uint32_t b) { return "effort: " + std::to_string(b); }

}  // namespace flotilla::trainer_bridge
