// BatchAssembler: turns completed groups into one training Batch (common/proto/trainer.proto).
//
// Per sample: ids = prompt + completion; loss_mask 0 on the prompt and on context tokens inside
// the completion (tool output, scaffold text), 1 on generated tokens except tokens older than
// the off-policy bound (trainer_version - token_version > eta), which get 0 and are counted in
// Batch.stale_masked_tokens (never silently dropped); behaviour_logprobs 0 / policy_versions -1
// on context; routing has one row of routing_width ids per position of ids, -1 rows on context
// (the trainer routes those itself) and the engine's rows, concatenated across segments, on
// generated tokens; advantage from GroupAdvantages over the sample's group (a failed sample
// counts with the failure reward the runner gave it). A sample of fewer than two tokens (one
// that failed before its prompt was rendered, e.g. no sandbox could be had) has nothing to
// predict: it shapes its group's advantages but is not a sequence of the batch.
//
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "flotilla/proto/trainer.pb.h"
#include "flotilla/trainer_bridge/advantages.h"
#include "flotilla/trainer_bridge/rollout_sample.h"

namespace flotilla::trainer_bridge {

struct BatchOptions {
  uint32_t staleness = 4;      // eta
  AdvantageOptions advantages;
};

class BatchAssembler {
 public:
  explicit BatchAssembler(const BatchOptions& options) : options_(options) {}

  // `groups`: each inner vector is one complete group. `trainer_version`: the version the
  // trainer holds (the one it will compute gradients with).
  [[nodiscard]] v1::Batch Assemble(const std::vector<std::vector<RolloutSample>>& groups, int64_t step,
                                   int64_t trainer_version) const;

 private:
  BatchOptions options_;
};

}  // namespace flotilla::trainer_bridge
