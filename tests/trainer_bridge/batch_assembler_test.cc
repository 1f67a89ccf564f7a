// Batch assembly: stale-token loss masking counts, routing rows, advantages per group, and the
// multi-turn loss mask (only model-generated tokens are trained on).
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

// A sample that failed before any token (its node was gone before its sandbox was made) is
// no sequence of the batch (the trainer has nothing to predict in it), but its failure
// reward shapes its group's advantages.
TEST(BatchAssemblerTest, SampleWithoutTokensShapesAdvantagesButIsNoSequence) {
  BatchOptions o;
  o.advantages.std_scaling = false;
  BatchAssembler a(o);
  RolloutSample nothing;
  nothing.id = 1;
  nothing.group = 0;
  nothing.failed = true;
  nothing.reward = -1.0;
  v1::Batch b = a.Assemble({{Sample(0, 0, 1.0, {0}), nothing, Sample(2, 0, 0.0, {0})}}, 0, 0);
  ASSERT_EQ(b.samples_size(), 2);
  EXPECT_EQ(b.samples(0).trajectory_id(), "s0");
  EXPECT_EQ(b.samples(1).trajectory_id(), "s2");
  // Group mean 0: the successes' advantages are their rewards.
  EXPECT_FLOAT_EQ(b.samples(0).advantage(), 1.0f);
  EXPECT_FLOAT_EQ(b.samples(1).advantage(), 0.0f);
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

inference::TokenRecord Token(int32_t id, float logprob, int64_t version) {
  inference::TokenRecord t;
  t.token = id;
  t.logprob = logprob;
  t.policy_version = version;
  t.experts = {id % 4, 3};
  return t;
}

template <typename T, typename Field>
std::vector<T> Vec(const Field& f) {
  return std::vector<T>(f.begin(), f.end());
}

// Two model turns with a tool's output between them; the weights switch from v4 to v5 in the
// middle of the second turn (it resumes at a token boundary).
RolloutSample TwoTurnSample() {
  RolloutSample s;
  s.id = 3;
  s.group = 9;
  s.effort = 10;
  s.reward = 1.0;
  s.prompt = {256, 259, 65, 66};
  EXPECT_TRUE(s.Append({Token(48, -0.25f, 4), Token(49, -0.5f, 4)}).ok());  // turn 1: a tool call
  s.AppendContext(std::vector<int32_t>{300, 301, 302});                      // the tool's output
  EXPECT_TRUE(s.Append({Token(50, -1.0f, 4)}).ok());                         // turn 2, then a switch
  EXPECT_TRUE(s.Append({Token(51, -1.5f, 5), Token(52, -2.0f, 5)}).ok());
  return s;
}

TEST(RolloutSampleTest, ContextTokensAreMarkedAndKeepArraysAligned) {
  RolloutSample s = TwoTurnSample();
  EXPECT_EQ(s.prompt, (std::vector<int32_t>{256, 259, 65, 66}));
  EXPECT_EQ(s.completion, (std::vector<int32_t>{48, 49, 300, 301, 302, 50, 51, 52}));
  EXPECT_EQ(s.loss_mask, (std::vector<uint8_t>{1, 1, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(s.versions, (std::vector<int64_t>{4, 4, -1, -1, -1, 4, 5, 5}));
  EXPECT_EQ(s.routing.size(), 8u * 2);
  EXPECT_EQ(s.GeneratedTokens(), 5u);
  EXPECT_EQ(s.MinVersion(), 4);  // context tokens have no version
  EXPECT_EQ(s.MaxVersion(), 5);
}

TEST(BatchAssemblerTest, MultiTurnLossMaskCoversOnlyModelTokens) {
  BatchOptions o;
  o.staleness = 1;
  o.advantages.std_scaling = false;
  o.advantages.effort.levels = {10};
  o.advantages.effort.k0 = 1.0;
  o.advantages.effort.c_max = 10.0;
  o.advantages.effort.l_norm = 10.0;
  BatchAssembler a(o);
  RolloutSample other = Sample(4, 9, 0.0, {5, 5});
  other.effort = 10;
  // Rewards with the length penalty -l/10 over generated tokens only: 1 - 5/10 and 0 - 2/10;
  // centred: +0.35 and -0.35 (counting the tool output, l = 8, would give +0.2).
  std::vector<std::vector<RolloutSample>> groups = {{TwoTurnSample(), other}};

  v1::Batch b = a.Assemble(groups, 0, /*trainer_version=*/5);  // every model token within eta
  ASSERT_EQ(b.samples_size(), 2);
  const v1::Sample& s = b.samples(0);
  EXPECT_EQ(Vec<int32_t>(s.ids()), (std::vector<int32_t>{256, 259, 65, 66, 48, 49, 300, 301, 302, 50, 51, 52}));
  EXPECT_EQ(Vec<uint32_t>(s.loss_mask()), (std::vector<uint32_t>{0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(Vec<int64_t>(s.policy_versions()), (std::vector<int64_t>{-1, -1, -1, -1, 4, 4, -1, -1, -1, 4, 5, 5}));
  EXPECT_EQ(Vec<float>(s.behaviour_logprobs()),
            (std::vector<float>{0, 0, 0, 0, -0.25f, -0.5f, 0, 0, 0, -1.0f, -1.5f, -2.0f}));
  EXPECT_EQ(Vec<int32_t>(s.routing()), (std::vector<int32_t>{-1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 1, 3, -1, -1, -1,
                                                             -1, -1, -1, 2, 3, 3, 3, 0, 3}));
  EXPECT_FLOAT_EQ(s.advantage(), 0.35f);
  EXPECT_FLOAT_EQ(b.samples(1).advantage(), -0.35f);
  EXPECT_EQ(b.total_loss_tokens(), 7u);  // 5 model tokens + the other sample's 2
  EXPECT_EQ(b.stale_masked_tokens(), 0u);

  // One version later the v4 tokens lag 2 > eta: masked token by token, the v5 tokens of the
  // same turn kept; tool output never counts as stale.
  v1::Batch later = a.Assemble(groups, 1, /*trainer_version=*/6);
  EXPECT_EQ(Vec<uint32_t>(later.samples(0).loss_mask()), (std::vector<uint32_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(later.stale_masked_tokens(), 3u);
  EXPECT_EQ(later.total_loss_tokens(), 4u);
  EXPECT_FLOAT_EQ(later.samples(0).advantage(), 0.35f);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
