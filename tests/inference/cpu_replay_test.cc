// Routing replay on the Flotilla-format CPU backend: forcing the experts a pass chose gives the
// same logits; forcing others uses exactly those and changes the logits; bad replays are refused.
#include <memory>
#include <numeric>
#include <vector>

#include "backend.h"
#include "gtest/gtest.h"
#include "inference/test_model.h"
#include "thread_pool.h"

namespace flotilla::inference {
namespace {

TEST(CpuReplay, ForcedExpertsAreUsed) {
  const ModelConfig c = testing::TinyConfig();
  ThreadPool pool(1);
  auto backend = CreateCpuBackend(c, 16, 4 << 20, &pool);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->SetRandomWeights(7, 0.2f).ok());
  StepInput in;
  const int T = 12;
  for (int t = 0; t < T; ++t) {
    in.tokens.push_back((t * 29 + 3) % c.vocab_size);
    in.positions.push_back(t);
    in.row_seq.push_back(0);
    in.logit_rows.push_back(t);
  }
  in.seq_pages = {{0}};
  StepOutput free_run, same, forced;
  ASSERT_TRUE((*backend)->Forward(in, &free_run).ok());
  in.replay_experts = free_run.experts;
  ASSERT_TRUE((*backend)->Forward(in, &same).ok());
  EXPECT_EQ(same.logits, free_run.logits);
  EXPECT_EQ(same.experts, free_run.experts);
  for (int32_t& e : in.replay_experts) e = (e + 1) % c.n_experts;
  ASSERT_TRUE((*backend)->Forward(in, &forced).ok());
  EXPECT_EQ(forced.experts, in.replay_experts);
  EXPECT_NE(forced.logits, free_run.logits);
  in.replay_experts[0] = c.n_experts;
  EXPECT_FALSE((*backend)->Forward(in, &forced).ok());
  in.replay_experts.pop_back();
  EXPECT_FALSE((*backend)->Forward(in, &forced).ok());
}

}  // namespace
}  // namespace flotilla::inference
