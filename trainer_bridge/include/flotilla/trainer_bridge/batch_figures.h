// BatchFigures: what a dashboard plots for one training batch, computed from the batch the
// bridge sends the trainer:
//
//   samples, groups                 counts
//   reward_mean                     over every sample; reward_mean/<dataset> per dataset
//   zero_variance_group_frac        share of groups whose samples all have one reward (no signal)
//   response_tokens_mean            loss tokens (model-generated) per sample
//   staleness_mean, staleness_max   trainer version minus each loss token's policy version
//   stale_masked_frac               loss tokens masked by the off-policy bound, over all of them
//
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "flotilla/proto/trainer.pb.h"

namespace flotilla::trainer_bridge {

std::map<std::string, double> BatchFigures(const v1::Batch& batch, int64_t trainer_version);

}  // namespace flotilla::trainer_bridge
