// Deliveries made while the next forward runs (EngineOptions::overlap_delivery): the same
// tokens as serial delivery, every sequence's updates in order with its finish last, and
// interrupts, resumes and releases that land between overlapped steps.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine_test_fixture.h"

namespace flotilla::inference {
namespace {

using testing::Collected;

class OverlapDeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TinyConfig();
    path_ = dir_.file("m.safetensors");
    ASSERT_TRUE(testing::WriteRandomModel(path_, config_, 7, 0.1f).ok());
  }
  std::unique_ptr<Engine> NewEngine(int overlap) {
    EngineOptions opts;
    opts.threads = 2;
    opts.kv_memory_bytes = 8 << 20;
    opts.overlap_delivery = overlap;
    auto e = Engine::Create(opts);
    EXPECT_TRUE(e.ok()) << e.status();
    EXPECT_TRUE((*e)->LoadModel("m", config_, path_, 1).ok());
    return std::move(*e);
  }
  GenerateRequest Request(uint64_t seed, uint32_t max_new) const { return testing::KeptRequest(max_new, seed); }

  flotilla::testing::TempDir dir_;
  ModelConfig config_;
  std::string path_;
};

// The same tokens, and the same kept state: each engine's saved state (every record of the
// sequence) has the same size.
TEST_F(OverlapDeliveryTest, SameTokensAndStateAsSerialDelivery) {
  auto serial = NewEngine(0);
  auto overlapped = NewEngine(1);
  for (uint64_t seed : {1, 2, 3}) {
    auto a = serial->GenerateBlocking(Request(seed, 24));
    auto b = overlapped->GenerateBlocking(Request(seed, 24));
    ASSERT_TRUE(a.ok() && b.ok());
    auto saved_a = serial->SaveState(a->sequence_id, false, 0);
    auto saved_b = overlapped->SaveState(b->sequence_id, false, 0);
    ASSERT_TRUE(saved_a.ok() && saved_b.ok());
    auto bytes_a = serial->Release(*saved_a);
    auto bytes_b = overlapped->Release(*saved_b);
    ASSERT_TRUE(bytes_a.ok() && bytes_b.ok());
    EXPECT_EQ(*bytes_a, *bytes_b) << seed;
    ASSERT_EQ(a->tokens.size(), 24u);
    ASSERT_EQ(b->tokens.size(), 24u);
    for (size_t i = 0; i < 24; ++i) {
      EXPECT_EQ(a->tokens[i].token, b->tokens[i].token) << seed << " " << i;
      EXPECT_EQ(a->tokens[i].logprob, b->tokens[i].logprob) << seed << " " << i;
      EXPECT_EQ(a->tokens[i].experts, b->tokens[i].experts) << seed << " " << i;
    }
  }
}

// Eight sequences at once: each gets all its tokens, in one stream ending with its finish.
TEST_F(OverlapDeliveryTest, ConcurrentSequencesGetOrderedUpdates) {
  auto engine = NewEngine(1);
  constexpr int kSeqs = 8;
  struct Stream {
    std::mutex mu;
    size_t tokens = 0, after_finish = 0;
    bool finished = false;
    absl::Notification done;
  };
  std::vector<std::unique_ptr<Stream>> streams;
  for (int s = 0; s < kSeqs; ++s) {
    streams.push_back(std::make_unique<Stream>());
    Stream* st = streams.back().get();
    auto id = engine->Generate(Request(10 + s, 16 + s), [st](const GenerateUpdate& u) {
      std::lock_guard<std::mutex> l(st->mu);
      (st->finished ? st->after_finish : st->tokens) += u.tokens.size();
      if (u.finish != FinishReason::kRunning && !st->finished) {
        st->finished = true;
        st->done.Notify();
      }
    });
    ASSERT_TRUE(id.ok()) << id.status();
  }
  for (int s = 0; s < kSeqs; ++s) {
    ASSERT_TRUE(streams[s]->done.WaitForNotificationWithTimeout(absl::Seconds(60))) << s;
    std::lock_guard<std::mutex> l(streams[s]->mu);
    EXPECT_EQ(streams[s]->tokens, static_cast<size_t>(16 + s)) << s;
    EXPECT_EQ(streams[s]->after_finish, 0u) << s;
  }
}

// An interrupt from the sink (between two overlapped steps), then a resume: together the same
// tokens as one uninterrupted run, so the sequence's records, RNG and cache stayed in step.
TEST_F(OverlapDeliveryTest, InterruptFromSinkThenResumeMatchesOneRun) {
  auto engine = NewEngine(1);
  auto whole = engine->GenerateBlocking(Request(5, 20));
  ASSERT_TRUE(whole.ok());
  Collected first;
  std::atomic<Engine*> target{engine.get()};
  std::string id;
  std::mutex id_mu;
  auto started = engine->Generate(Request(5, 20), [&](const GenerateUpdate& u) {
    first.Sink()(GenerateUpdate(u));
    if (u.finish == FinishReason::kRunning && first.tokens.size() == 6) {
      (void)target.load()->Interrupt(u.sequence_id);
    }
  });
  ASSERT_TRUE(started.ok());
  ASSERT_TRUE(first.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(first.finish, FinishReason::kInterrupted);
  const size_t got = first.tokens.size();
  ASSERT_GE(got, 6u);
  ASSERT_LT(got, 20u);
  Collected rest;
  SamplingParams sampling = Request(5, 20).sampling;
  sampling.max_new_tokens = static_cast<uint32_t>(20 - got);
  ASSERT_TRUE(engine->Resume(*started, sampling, rest.Sink()).ok());
  ASSERT_TRUE(rest.done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  std::vector<TokenRecord> all = first.tokens;
  all.insert(all.end(), rest.tokens.begin(), rest.tokens.end());
  ASSERT_EQ(all.size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(all[i].token, whole->tokens[i].token) << i;
    EXPECT_EQ(all[i].experts, whole->tokens[i].experts) << i;
  }
  // The saved state holds every record: a load and resume of one more token continues.
  auto handle = engine->SaveState(*started, false, 0);
  ASSERT_TRUE(handle.ok()) << handle.status();
}

// Release of a running sequence waits for the scheduler to let go between two steps; the
// sequence is cancelled and nothing reaches its sink afterwards.
TEST_F(OverlapDeliveryTest, ReleaseWhileRunningCancels) {
  auto engine = NewEngine(1);
  std::mutex mu;
  size_t after_finish = 0, tokens = 0;
  bool finished = false;
  FinishReason reason = FinishReason::kRunning;
  absl::Notification some, done;
  auto id = engine->Generate(Request(9, 400), [&](const GenerateUpdate& u) {
    std::lock_guard<std::mutex> l(mu);
    (finished ? after_finish : tokens) += u.tokens.size();
    if (tokens >= 4 && !some.HasBeenNotified()) some.Notify();
    if (u.finish != FinishReason::kRunning && !finished) {
      finished = true;
      reason = u.finish;
      done.Notify();
    }
  });
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(some.WaitForNotificationWithTimeout(absl::Seconds(60)));
  auto released = engine->Release(*id);
  ASSERT_TRUE(released.ok()) << released.status();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(reason, FinishReason::kCancelled);
  EXPECT_LT(tokens, 400u);
  EXPECT_EQ(after_finish, 0u);
}

}  // namespace
}  // namespace flotilla::inference
