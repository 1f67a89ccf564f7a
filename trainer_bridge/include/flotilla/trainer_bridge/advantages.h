// GRPO group-relative advantages with effort levels and the effort-dependent length penalty.
//
//   r_len(b, l) = -min(C_max, k(b) * l / L_norm),   k(b) = k0 * exp(-(b - b_min) / tau)
//   R_i = reward_i + r_len(b_i, l_i)
//   A_i = R_i - mean{R_j : j in the group, b_j == b_i}     (centred within the effort subgroup)
//   with std scaling: A_i /= std{R_j : b_j == b_i} (population std); a subgroup whose std is
//   below `eps` gets A_i = 0 (no signal, no blow-up).
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "flotilla/trainer_bridge/experiment_config.h"

namespace flotilla::trainer_bridge {

struct AdvantageInput {
  double reward = 0;
  uint32_t effort = 0;   // 0: no effort level
  uint32_t length = 0;   // generated tokens
};

struct AdvantageOptions {
  bool std_scaling = true;
  double eps = 1e-6;
  EffortConfig effort;   // k0 == 0 or no levels: no length penalty
};

// k(b); b_min is the smallest configured level (1 when none are configured).
double EffortPenaltyScale(const EffortConfig& effort, uint32_t b);
// r_len(b, l) <= 0; 0 when effort control is off or b == 0.
double LengthPenalty(const EffortConfig& effort, uint32_t b, uint32_t length);
// One advantage per input, in input order.
std::vector<double> GroupAdvantages(const std::vector<AdvantageInput>& group,
                                    const AdvantageOptions& options);
// The system-prompt line that carries the effort level to the policy ("effort: 40").
std::string EffortPromptLine(uint32_t b);

}  // namespace flotilla::trainer_bridge
