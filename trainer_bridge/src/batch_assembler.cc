#include "flotilla/trainer_bridge/batch_assembler.h"

#include "absl/strings/str_cat.h"

namespace flotilla::trainer_bridge {

v1::Batch BatchAssembler::Assemble(const std::vector<std::vector<RolloutSample>>& groups, int64_t step,
                                   int64_t trainer_version) const {
  v1::Batch batch;
  batch.set_step(step);
  batch.set_policy_version(trainer_version);
  uint32_t stale = 0;
  uint32_t total = 0;
  for (const auto& group : groups) {
    std::vector<AdvantageInput> inputs;
    for (const auto& s : group) {
      inputs.push_back({s.reward, s.effort, s.GeneratedTokens()});
    }
    std::vector<double> adv = GroupAdvantages(inputs, options_.advantages);
    for (size_t i = 0; i < group.size(); ++i) {
      const RolloutSample& s = group[i];
      // A sample that failed before any token (no sandbox: its node was gone) has no position
      // to predict; its failure reward has shaped the group's advantages above.
      if (s.prompt.size() + s.completion.size() < 2) continue;
      v1::Sample* out = batch.add_samples();
      out->set_trajectory_id(absl::StrCat("s", s.id));
      out->set_group_id(absl::StrCat("g", s.group));
      out->set_dataset(s.dataset);
      out->set_advantage(static_cast<float>(adv[i]));
      out->set_reward(static_cast<float>(s.reward));
      out->set_effort(s.effort);
      out->set_routing_width(s.routing_width);
      for (int32_t id : s.prompt) {
        out->add_ids(id);
        out->add_loss_mask(0);
        out->add_behaviour_logprobs(0);
        out->add_policy_versions(-1);
        for (uint32_t k = 0; k < s.routing_width; ++k) out->add_routing(-1);
      }
      for (size_t t = 0; t < s.completion.size(); ++t) {
        out->add_ids(s.completion[t]);
        if (s.loss_mask[t] == 0) {  // context the scaffold added: never trained on
          out->add_loss_mask(0);
          out->add_behaviour_logprobs(0);
          out->add_policy_versions(-1);
          continue;
        }
        bool too_old = trainer_version - s.versions[t] > static_cast<int64_t>(options_.staleness);
        out->add_loss_mask(too_old ? 0 : 1);
        stale += too_old ? 1 : 0;
        total += too_old ? 0 : 1;
        out->add_behaviour_logprobs(s.logprobs[t]);
        out->add_policy_versions(s.versions[t]);
      }
      out->mutable_routing()->Add(s.routing.begin(), s.routing.end());
    }
  }
  batch.set_stale_masked_tokens(stale);
  batch.set_total_loss_tokens(total);
  return batch;
}

}  // namespace flotilla::trainer_bridge
