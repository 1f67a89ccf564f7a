#include "flotilla/trainer_bridge/batch_figures.h"

#include <gtest/gtest.h>

namespace flotilla::trainer_bridge {
namespace {

v1::Sample MakeSample(const std::string& group, const std::string& dataset, float reward,
                      std::vector<int64_t> versions) {
  v1::Sample s;
  s.set_group_id(group);
  s.set_dataset(dataset);
  s.set_reward(reward);
  for (int64_t v : versions) {
    s.add_loss_mask(v >= 0 ? 1 : 0);
    s.add_policy_versions(v);
  }
  return s;
}

TEST(BatchFiguresTest, RewardsGroupsLengthsAndStaleness) {
  v1::Batch b;
  *b.add_samples() = MakeSample("g1", "arith", 1.0f, {-1, 4, 4});      // prompt token, two generated
  *b.add_samples() = MakeSample("g1", "arith", 0.0f, {-1, 3, 4, 4});
  *b.add_samples() = MakeSample("g2", "files", 0.5f, {-1, 2});
  *b.add_samples() = MakeSample("g2", "files", 0.5f, {-1, 4});
  b.set_total_loss_tokens(7);
  b.set_stale_masked_tokens(1);
  auto f = BatchFigures(b, /*trainer_version=*/4);
  EXPECT_EQ(f["samples"], 4);
  EXPECT_EQ(f["groups"], 2);
  EXPECT_DOUBLE_EQ(f["reward_mean"], 0.5);
  EXPECT_DOUBLE_EQ(f["reward_mean/arith"], 0.5);
  EXPECT_DOUBLE_EQ(f["reward_mean/files"], 0.5);
  EXPECT_DOUBLE_EQ(f["zero_variance_group_frac"], 0.5);  // g2: both 0.5
  EXPECT_DOUBLE_EQ(f["response_tokens_mean"], 7.0 / 4);
  EXPECT_DOUBLE_EQ(f["staleness_mean"], 3.0 / 7);          // lags 0,0,1,0,0,2,0
  EXPECT_DOUBLE_EQ(f["staleness_max"], 2);
  EXPECT_DOUBLE_EQ(f["stale_masked_frac"], 1.0 / 7);
  EXPECT_DOUBLE_EQ(f["stale_token_frac"], 2.0 / 7);        // the v3 and the v2 token
}

TEST(BatchFiguresTest, EmptyBatchHasOnlyItsCount) {
  auto f = BatchFigures(v1::Batch(), 0);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f["samples"], 0);
}

}  // namespace
}  // namespace flotilla::trainer_bridge
