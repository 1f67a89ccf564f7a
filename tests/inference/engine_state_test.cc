// Token-level interrupt/resume, weight switches mid-sample, and state save/load.
#include <atomic>
#include <chrono>
#include <thread>
#include <random>

#include "engine_test_fixture.h"
#include "flotilla/inference/tokenizer.h"

namespace flotilla::inference {
namespace {

using testing::Collected;

void ExpectSameRecords(const std::vector<TokenRecord>& a, const std::vector<TokenRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].token, b[i].token) << i;
    EXPECT_EQ(a[i].logprob, b[i].logprob) << i;
    EXPECT_EQ(a[i].experts, b[i].experts) << i;
    EXPECT_EQ(a[i].policy_version, b[i].policy_version) << i;
  }
}

class EngineStateTest : public testing::EngineFixture {};

TEST_F(EngineStateTest, InterruptAtRandomTokenThenResumeEqualsUninterruptedRun) {
  constexpr uint32_t kTotal = 24;
  auto full = engine_->GenerateBlocking(Request(kTotal, 42));
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(full->tokens.size(), kTotal);

  std::mt19937 rng(1234);
  for (int trial = 0; trial < 3; ++trial) {
    const uint32_t cut = std::uniform_int_distribution<uint32_t>(1, kTotal - 1)(rng);
    Collected first;
    std::string id;
    auto sink = first.Sink();
    auto started = engine_->Generate(Request(kTotal, 42), [&, sink](const GenerateUpdate& u) {
      sink(GenerateUpdate(u));
      if (u.finish == FinishReason::kRunning && first.tokens.size() == cut) {
        EXPECT_TRUE(engine_->Interrupt(u.sequence_id).ok());
      }
    });
    ASSERT_TRUE(started.ok());
    first.done.WaitForNotification();
    ASSERT_EQ(first.finish, FinishReason::kInterrupted);
    ASSERT_EQ(first.tokens.size(), cut);
    const uint64_t prefill_before = engine_->Stats().prefill_tokens;

    Collected rest;
    SamplingParams sp = Request(kTotal - cut, 42).sampling;
    ASSERT_TRUE(engine_->Resume(*started, sp, rest.Sink()).ok());
    rest.done.WaitForNotification();
    EXPECT_EQ(rest.finish, FinishReason::kLength);
    EXPECT_EQ(rest.prefilled, 0u);
    EXPECT_EQ(engine_->Stats().prefill_tokens, prefill_before);
    std::vector<TokenRecord> joined = first.tokens;
    joined.insert(joined.end(), rest.tokens.begin(), rest.tokens.end());
    ExpectSameRecords(joined, full->tokens);
    EXPECT_TRUE(engine_->Release(*started).ok());
  }
}

TEST_F(EngineStateTest, WeightSwitchMidSampleKeepsEarlierTokensAndNeverPrefills) {
  Collected first;
  auto sink = first.Sink();
  auto id = engine_->Generate(Request(40, 9), [&, sink](const GenerateUpdate& u) {
    sink(GenerateUpdate(u));
    if (u.finish == FinishReason::kRunning && first.tokens.size() == 10) engine_->InterruptAll();
  });
  ASSERT_TRUE(id.ok());
  first.done.WaitForNotification();
  ASSERT_EQ(first.finish, FinishReason::kInterrupted);
  ASSERT_EQ(first.tokens.size(), 10u);
  const uint64_t prefill_before = engine_->Stats().prefill_tokens;

  ASSERT_TRUE(engine_->UpdateWeights("student", v2_, 2).ok());
  EXPECT_EQ(*engine_->PolicyVersion("student"), 2);

  Collected rest;
  ASSERT_TRUE(engine_->Resume(*id, Request(8, 9).sampling, rest.Sink()).ok());
  rest.done.WaitForNotification();
  ASSERT_EQ(rest.tokens.size(), 8u);
  EXPECT_EQ(rest.prefilled, 0u);
  EXPECT_EQ(engine_->Stats().prefill_tokens, prefill_before);
  for (const TokenRecord& r : first.tokens) EXPECT_EQ(r.policy_version, 1);
  for (const TokenRecord& r : rest.tokens) EXPECT_EQ(r.policy_version, 2);

  // The kept state still holds the pre-switch records unchanged: save and inspect via reload.
  auto handle = engine_->SaveState(*id, /*to_file=*/false, 0);
  ASSERT_TRUE(handle.ok()) << handle.status();
  ASSERT_TRUE(engine_->LoadState(*handle).ok());
  Collected more;
  ASSERT_TRUE(engine_->Resume(*id, Request(2, 9).sampling, more.Sink()).ok());
  more.done.WaitForNotification();
  EXPECT_EQ(more.tokens.size(), 2u);
  EXPECT_EQ(more.tokens[0].policy_version, 2);
  EXPECT_EQ(engine_->Stats().prefill_tokens, prefill_before);
}

TEST_F(EngineStateTest, WeightsSwapBetweenStepsWhileASequenceRuns) {
  absl::Notification five;
  Collected run;
  auto sink = run.Sink();
  std::atomic<int> seen{0};
  std::atomic<bool> swapped{false};
  ASSERT_TRUE(engine_->Generate(Request(200, 4), [&, sink](const GenerateUpdate& u) {
    sink(GenerateUpdate(u));
    if (seen.fetch_add(static_cast<int>(u.tokens.size())) < 5 && seen.load() >= 5) five.Notify();
    // Throttle decoding until the swap is in, so that on a loaded machine the weights still
    // change in the middle of the sample rather than after its last token.
    if (!swapped.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }).ok());
  five.WaitForNotification();
  const uint64_t prefill_before = engine_->Stats().prefill_tokens;
  ASSERT_TRUE(engine_->UpdateWeights("student", v2_, 2).ok());
  swapped.store(true);
  run.done.WaitForNotification();
  ASSERT_EQ(run.finish, FinishReason::kLength);
  ASSERT_EQ(run.tokens.size(), 200u);
  EXPECT_EQ(engine_->Stats().prefill_tokens, prefill_before);
  // Versions never go back, and both versions produced tokens of the one sample.
  size_t first_v2 = run.tokens.size();
  for (size_t i = 0; i < run.tokens.size(); ++i) {
    if (run.tokens[i].policy_version == 2 && first_v2 == run.tokens.size()) first_v2 = i;
    if (i > first_v2) {
      EXPECT_EQ(run.tokens[i].policy_version, 2) << i;
    }
  }
  EXPECT_GE(first_v2, 5u);
  EXPECT_LT(first_v2, run.tokens.size());
  for (size_t i = 0; i < first_v2; ++i) {
    EXPECT_EQ(run.tokens[i].policy_version, 1) << i;
  }
}

TEST_F(EngineStateTest, SaveLoadRoundTripThroughHostAndFileContinuesExactly) {
  constexpr uint32_t kTotal = 20;
  auto full = engine_->GenerateBlocking(Request(kTotal, 5));
  ASSERT_TRUE(full.ok());
  for (bool to_file : {false, true}) {
    auto part = engine_->GenerateBlocking(Request(7, 5));
    ASSERT_TRUE(part.ok());
    const uint32_t pages_with_seq = engine_->Stats().kv_pages_used;
    EXPECT_GT(pages_with_seq, 0u);
    auto handle = engine_->SaveState(part->sequence_id, to_file, 60'000);
    ASSERT_TRUE(handle.ok()) << handle.status();
    EXPECT_EQ(engine_->Stats().kv_pages_used, pages_with_seq - 2);  // 2 pages of 16 for 32 tokens
    EXPECT_EQ(engine_->Resume(part->sequence_id, {}, nullptr).code(), absl::StatusCode::kNotFound);
    auto id = engine_->LoadState(*handle);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, part->sequence_id);
    EXPECT_EQ(engine_->LoadState(*handle).status().code(), absl::StatusCode::kNotFound);
    Collected rest;
    ASSERT_TRUE(engine_->Resume(*id, Request(kTotal - 7, 5).sampling, rest.Sink()).ok());
    rest.done.WaitForNotification();
    std::vector<TokenRecord> joined = part->tokens;
    joined.insert(joined.end(), rest.tokens.begin(), rest.tokens.end());
    ExpectSameRecords(joined, full->tokens);
    auto freed = engine_->Release(*id);
    ASSERT_TRUE(freed.ok());
    // 45 tokens, 44 with K/V: 3 pages x (layers x K/V x 16 tokens x kvd 32 x f32).
    EXPECT_EQ(*freed, 3u * (2 * 2 * 16 * 32 * 4));
  }
}

TEST_F(EngineStateTest, SavedStateExpiresAfterTtlAndReleaseFreesAtOnce) {
  auto part = engine_->GenerateBlocking(Request(5, 1));
  ASSERT_TRUE(part.ok());
  auto handle = engine_->SaveState(part->sequence_id, true, 1000);
  ASSERT_TRUE(handle.ok());
  clock_.AdvanceMillis(999);
  auto part2 = engine_->GenerateBlocking(Request(5, 1));
  ASSERT_TRUE(part2.ok());
  auto handle2 = engine_->SaveState(part2->sequence_id, false, 0);
  ASSERT_TRUE(handle2.ok());
  clock_.AdvanceMillis(2);
  EXPECT_EQ(engine_->LoadState(*handle).status().code(), absl::StatusCode::kNotFound);
  auto bytes = engine_->Release(*handle2);
  ASSERT_TRUE(bytes.ok());
  EXPECT_GT(*bytes, 0u);
  EXPECT_EQ(engine_->LoadState(*handle2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine_->Stats().kv_pages_used, 0u);
  EXPECT_EQ(engine_->Release("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(EngineStateTest, ExtendingAKeptSequencePrefillsOnlyTheNewTokens) {
  auto part = engine_->GenerateBlocking(Request(4, 3));
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->prefilled_tokens, Encode("interrupt me at any token").size());
  GenerateRequest more = Request(3, 3);
  more.sequence_id = part->sequence_id;
  more.prompt = Encode("more");
  auto ext = engine_->GenerateBlocking(more);
  ASSERT_TRUE(ext.ok()) << ext.status();
  EXPECT_EQ(ext->prefilled_tokens, 4u);
  EXPECT_EQ(ext->tokens.size(), 3u);
}

}  // namespace
}  // namespace flotilla::inference
