// Batch assembly: stale-token loss masking counts, routing rows, advantages per group.
#include "flotilla/trainer_bridge/batch_assembler.h"

#include "gtest/gtest.h"

namespace flotilla::trainer_bridge {
namespace {

RolloutSample Sample(uint64_t id, uint64_t group, double reward, std::vector<int64_t> versions) {
  RolloutSample s;
  s.id = id;
  s.group = group;
  s.dataset = "d";
  s.reward = reward;
  s.prompt = {256, 259, 65};
  std::vector<inference::TokenRecord> toks;
  for (size_t i = 0; i < versions.size(); ++i) {
    inference::TokenRecord t;
    t.token = 48 + static_cast<int32_t>(i);
    t.logprob = -0.5f * static_cast<float>(i + 1);
    t.policy_version = versions[i];
    t.experts = {static_cast<int32_t>(id), static_cast<int32_t>(i)};
    toks.push_back(t);
  }
  EXPECT_TRUE(s.Append(toks).ok());
  return s;
}

TEST(BatchAssemblerTest, MasksTokensOlderThanEtaAndCountsThem) {
  BatchOptions o;
  o.staleness = 2;
  o.advantages.std_scaling = false;
  BatchAssembler a(o);
  // Trainer at version 5: versions 2 (lag 3) are stale, 3 (lag 2) and newer are kept.
  std::vector<std::vector<RolloutSample>> groups = {
      {Sample(0, 7, 1.0, {2, 2, 3, 4}), Sample(1, 7, 0.0, {3, 5})},
      {Sample(2, 8, 1.0, {1, 1, 1})}};
  v1::Batch b = a.Assemble(groups, 11, 5);
  EXPECT_EQ(b.step(), 11);
  EXPECT_EQ(b.policy_version(), 5);
  EXPECT_EQ(b.stale_masked_tokens(), 5u);
  EXPECT_EQ(b.total_loss_tokens(), 4u);
  ASSERT_EQ(b.samples_size(), 3);
  const v1::Sample& s0 = b.samples(0);
  EXPECT_EQ(s0.trajectory_id(), "s0");
  EXPECT_EQ(s0.group_id(), "g7");
  EXPECT_EQ(std::vector<int32_t>(s0.ids().begin(), s0.ids().end()), (std::vector<int32_t>{256, 259, 65, 48, 49, 50, 51}));
  EXPECT_EQ(std::vector<uint32_t>(s0.loss_mask().begin(), s0.loss_mask().end()),
            (std::vector<uint32_t>{0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(std::vector<int64_t>(s0.policy_versions().begin(), s0.policy_versions().end()),
            (std::vector<int64_t>{-1, -1, -1, 2, 2, 3, 4}));
  EXPECT_FLOAT_EQ(s0.behaviour_logprobs(3), -0.5f);
  EXPECT_FLOAT_EQ(s0.behaviour_logprobs(0), 0.0f);
  EXPECT_EQ(s0.routing_width(), 2u);
  EXPECT_EQ(std::vector<int32_t>(s0.routing().begin(), s0.routing().end()),
            (std::vector<int32_t>{-1, -1, -1, -1, -1, -1, 0, 0, 0, 1, 0, 2, 0, 3}));
  EXPECT_FLOAT_EQ(s0.advantage(), 0.5f);
  EXPECT_FLOAT_EQ(b.samples(1).advantage(), -0.5f);
  EXPECT_FLOAT_EQ(b.samples(2).advantage(), 0.0f);  // a group of one has no relative signal
}

TEST(BatchAssemblerTest, FailedSamplesCountWithTheirFailureReward) {
  BatchOptions o;
  o.advantages.std_scaling = false;
  BatchAssembler a(o);
  RolloutSample bad = Sample(1, 0, 1.0, {0});
  bad.failed = true;
  bad.reward = -0.5;  // the runner gave it the experiment's failure_reward
  v1::Batch b = a.Assemble({{Sample(0, 0, 1.0, {0}), bad}}, 0, 0);
  EXPECT_FLOAT_EQ(b.samples(1).reward(), -0.5f);
  EXPECT_FLOAT_EQ(b.samples(0).advantage(), 0.75f);
  EXPECT_EQ(b.stale_masked_tokens(), 0u);
  EXPECT_EQ(b.total_loss_tokens(), 2u);
}

// A multi-turn sample: the scaffold's text between two replies is context, never trained on,
// with -1 routing rows; stale counting looks at generated tokens only.
TEST(BatchAssemblerTest, ContextInsideTheCompletionIsMasked) {
  BatchOptions o;
  o.staleness = 1;
  BatchAssembler a(o);
  RolloutSample s = Sample(0, 0, 1.0, {3, 3});
  s.AppendContext(std::vector<int32_t>{10, 11});
  inference::TokenRecord last;
  last.token = 60;
  last.logprob = -2.0f;
  last.policy_version = 1;
  last.experts = {5, 6};
  ASSERT_TRUE(s.Append({last}).ok());
  EXPECT_EQ(s.GeneratedTokens(), 3u);
  EXPECT_EQ(s.MinVersion(), 1);
  EXPECT_EQ(s.MaxVersion(), 3);
  v1::Batch b = a.Assemble({{s}}, 0, 3);
  const v1::Sample& out = b.samples(0);
  EXPECT_EQ(std::vector<int32_t>(out.ids().begin(), out.ids().end()),
            (std::vector<int32_t>{256, 259, 65, 48, 49, 10, 11, 60}));
  EXPECT_EQ(std::vector<uint32_t>(out.loss_mask().begin(), out.loss_mask().end()),
            (std::vector<uint32_t>{0, 0, 0, 1, 1, 0, 0, 0}));  // version 1 lags 3 by 2 > eta
  EXPECT_EQ(std::vector<int64_t>(out.policy_versions().begin(), out.policy_versions().end()),
            (std::vector<int64_t>{-1, -1, -1, 3, 3, -1, -1, 1}));
  EXPECT_EQ(std::vector<int32_t>(out.routing().begin(), out.routing().end()),
            (std::vector<int32_t>{-1, -1, -1, -1, -1, -1, 0, 0, 0, 1, -1, -1, -1, -1, 5, 6}));
  EXPECT_EQ(b.stale_masked_tokens(), 1u);
  EXPECT_EQ(b.total_loss_tokens(), 2u);
}

TEST(RolloutSampleTest, RoutingWidthMustNotChange) {
  RolloutSample s;
  inference::TokenRecord a, b;
  a.experts = {1, 2};
  b.experts = {1};
  ASSERT_TRUE(s.Append({a}).ok());
  EXPECT_EQ(s.Append({b}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
