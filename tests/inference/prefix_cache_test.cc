// The prefix cache: the page pool's sharing, copy-on-write matches, LRU eviction and epochs;
// and the engine with it against the engine without it (same tokens and logprobs, exact
// prefill counts), across weight swaps, interrupt/resume and SaveState/LoadState.
#include "prefix_cache.h"

#include <cmath>
#include <cstdlib>

#include "engine_test_fixture.h"

namespace flotilla::inference {
namespace {

using testing::Collected;

std::vector<int32_t> Ids(int n, int salt) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back((i * 7 + salt * 31 + 3) % 256);
  return v;
}

TEST(PagePool, SharesFullBlocksAndCopiesTheDivergentOne) {
  PagePool pool(8, 4);
  std::vector<int32_t> pages;
  for (int i = 0; i < 3; ++i) pages.push_back(*pool.Allocate());
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 2 full blocks + 2 tokens
  int32_t done = 0;
  uint64_t chain = 0;
  pool.Register(0, a, pages, 10, /*partial=*/true, &done, &chain);
  EXPECT_EQ(done, 2);
  for (int32_t p : pages) pool.Release(p);
  EXPECT_EQ(pool.referenced(), 0u);
  EXPECT_EQ(pool.cached(), 3u);

  // Same first block, diverging at the 7th token: one shared block, 2 tokens copied.
  PagePool::Match m = pool.Lookup(0, {1, 2, 3, 4, 5, 6, 0, 0, 0}, 8);
  ASSERT_EQ(m.shared.size(), 1u);
  EXPECT_EQ(m.shared[0], pages[0]);
  EXPECT_EQ(m.copy_from, pages[1]);
  EXPECT_EQ(m.copy_tokens, 2);
  EXPECT_EQ(m.tokens(), 6);
  EXPECT_EQ(pool.referenced(), 1u);
  pool.Release(m.shared[0]);

  // The whole history and more: both full blocks shared, the partial third copied (2 tokens).
  m = pool.Lookup(0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 11);
  EXPECT_EQ(m.shared.size(), 2u);
  EXPECT_EQ(m.copy_from, pages[2]);
  EXPECT_EQ(m.copy_tokens, 2);
  for (int32_t p : m.shared) pool.Release(p);

  // The limit cuts inside a full block: that block is copied, not shared.
  m = pool.Lookup(0, a, 7);
  EXPECT_EQ(m.shared.size(), 1u);
  EXPECT_EQ(m.copy_from, pages[1]);
  EXPECT_EQ(m.copy_tokens, 3);
  for (int32_t p : m.shared) pool.Release(p);

  // Another epoch (other weights) finds nothing.
  m = pool.Lookup(1, a, 9);
  EXPECT_TRUE(m.shared.empty());
  EXPECT_EQ(m.copy_tokens, 0);
}

TEST(PagePool, EvictsLeastRecentlyReleasedAndInvalidates) {
  PagePool pool(4, 2);
  auto keep = [&](std::vector<int32_t> tokens) {
    std::vector<int32_t> pages = {*pool.Allocate()};
    int32_t done = 0;
    uint64_t chain = 0;
    pool.Register(0, tokens, pages, 2, true, &done, &chain);
    pool.Release(pages[0]);
    return pages[0];
  };
  const int32_t first = keep({1, 2}), second = keep({3, 4});
  keep({5, 6});
  keep({7, 8});
  EXPECT_EQ(pool.cached(), 4u);
  // No free page: the least recently released ({1, 2}) goes first.
  EXPECT_EQ(*pool.Allocate(), first);
  EXPECT_TRUE(pool.Lookup(0, {1, 2, 9}, 2).shared.empty());
  EXPECT_EQ(pool.Lookup(0, {3, 4, 9}, 2).shared.size(), 1u);  // retains `second`
  EXPECT_EQ(pool.cached(), 2u);
  pool.Release(second);
  pool.Invalidate();
  EXPECT_EQ(pool.cached(), 0u);
  EXPECT_TRUE(pool.Lookup(0, {3, 4, 9}, 2).shared.empty());
  EXPECT_EQ(pool.referenced(), 1u);  // the page allocated above
}

// Two engines over the same weights, with and without the cache.
class PrefixCacheEngineTest : public testing::EngineFixture {
 protected:
  void SetUp() override {
    EngineFixture::SetUp();
    EngineOptions opts;
    opts.threads = 2;
    opts.kv_memory_bytes = 8 << 20;
    opts.prefix_cache = true;
    if (const char* overlap = std::getenv("FLOTILLA_TEST_OVERLAP_DELIVERY")) opts.overlap_delivery = std::atoi(overlap);
    auto e = Engine::Create(opts);
    ASSERT_TRUE(e.ok());
    cached_ = std::move(*e);
    ASSERT_TRUE(cached_->LoadModel("student", config_, v1_, 1).ok());
  }
  static GenerateRequest Req(std::vector<int32_t> prompt, uint64_t seed, uint32_t max_new = 6) {
    GenerateRequest r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = 0.8f;
    r.sampling.seed = seed;
    r.sampling.max_new_tokens = max_new;
    r.sampling.stop_tokens = {-1};
    return r;
  }
  // Same tokens; logprobs equal up to float rounding (a cache hit runs the prompt's last rows
  // in GEMMs of another row count).
  static void ExpectSame(const std::vector<TokenRecord>& a, const std::vector<TokenRecord>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].token, b[i].token) << i;
      EXPECT_NEAR(a[i].logprob, b[i].logprob, 1e-5) << i;
      EXPECT_EQ(a[i].experts, b[i].experts) << i;
    }
  }
  std::unique_ptr<Engine> cached_;
};

TEST_F(PrefixCacheEngineTest, ResentHistoryPrefillsOnlyNewTokens) {
  std::vector<int32_t> history = Ids(40, 1);
  for (int turn = 0; turn < 3; ++turn) {
    auto with = cached_->GenerateBlocking(Req(history, 10 + turn));
    auto without = engine_->GenerateBlocking(Req(history, 10 + turn));
    ASSERT_TRUE(with.ok() && without.ok());
    ExpectSame(with->tokens, without->tokens);
    EXPECT_EQ(without->prefilled_tokens, history.size());
    // Turn 0 prefills its 40 tokens; later turns their 9 new ones, plus the previous turn's
    // last generated token (sampled, never run through the model).
    EXPECT_EQ(with->prefilled_tokens, turn == 0 ? 40u : 10u) << turn;
    for (const auto& t : with->tokens) history.push_back(t.token);
    for (int32_t t : Ids(9, 5 + turn)) history.push_back(t);
  }
  // 45 and 60 positions came from the cache on turns 1 and 2.
  EXPECT_EQ(cached_->Stats().prefix_cached_tokens, 45u + 60u);
  EXPECT_EQ(cached_->Stats().kv_pages_used, 0u);
  EXPECT_GT(cached_->Stats().kv_pages_cached, 0u);
}

TEST_F(PrefixCacheEngineTest, NewWeightsNeverReuseOldKv) {
  const std::vector<int32_t> prompt = Ids(50, 2);
  ASSERT_TRUE(cached_->GenerateBlocking(Req(prompt, 1)).ok());
  ASSERT_GT(cached_->Stats().kv_pages_cached, 0u);
  ASSERT_TRUE(cached_->UpdateWeights("student", v2_, 2).ok());
  ASSERT_TRUE(engine_->UpdateWeights("student", v2_, 2).ok());
  EXPECT_EQ(cached_->Stats().kv_pages_cached, 0u);
  auto with = cached_->GenerateBlocking(Req(prompt, 3));
  auto without = engine_->GenerateBlocking(Req(prompt, 3));
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(with->prefilled_tokens, 50u);
  ExpectSame(with->tokens, without->tokens);
  EXPECT_EQ(cached_->Stats().prefix_cached_tokens, 0u);
  // A kept sequence whose K/V spans the swap registers nothing afterwards.
  GenerateRequest kept = Req(prompt, 4);
  kept.keep_state = true;
  auto k = cached_->GenerateBlocking(kept);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(cached_->Stats().prefix_cached_tokens, 49u);
  ASSERT_TRUE(cached_->UpdateWeights("student", v1_, 3).ok());
  ASSERT_TRUE(cached_->Release(k->sequence_id).ok());
  auto again = cached_->GenerateBlocking(Req(prompt, 5));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->prefilled_tokens, 50u);
}

TEST_F(PrefixCacheEngineTest, InterruptResumeAndSaveLoadOverSharedBlocks) {
  const std::vector<int32_t> base = Ids(48, 3);
  ASSERT_TRUE(cached_->GenerateBlocking(Req(base, 1)).ok());  // leaves 3 blocks cached
  std::vector<int32_t> prompt = base;
  for (int32_t t : Ids(7, 9)) prompt.push_back(t);
  auto full = engine_->GenerateBlocking(Req(prompt, 8, 12));
  ASSERT_TRUE(full.ok());

  Collected first;
  auto sink = first.Sink();
  GenerateRequest req = Req(prompt, 8, 12);
  req.keep_state = true;
  auto id = cached_->Generate(req, [&, sink](const GenerateUpdate& u) {
    sink(GenerateUpdate(u));
    if (u.finish == FinishReason::kRunning && first.tokens.size() == 4) {
      EXPECT_TRUE(cached_->Interrupt(u.sequence_id).ok());
    }
  });
  ASSERT_TRUE(id.ok());
  first.done.WaitForNotification();
  ASSERT_EQ(first.finish, FinishReason::kInterrupted);
  EXPECT_EQ(first.prefilled, 7u);
  auto handle = cached_->SaveState(*id, /*to_file=*/false, 0);
  ASSERT_TRUE(handle.ok()) << handle.status();
  auto loaded = cached_->LoadState(*handle);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  Collected rest;
  ASSERT_TRUE(cached_->Resume(*loaded, Req(prompt, 8, 8).sampling, rest.Sink()).ok());
  rest.done.WaitForNotification();
  std::vector<TokenRecord> joined = first.tokens;
  joined.insert(joined.end(), rest.tokens.begin(), rest.tokens.end());
  ExpectSame(joined, full->tokens);
  ASSERT_TRUE(cached_->Release(*loaded).ok());
  EXPECT_EQ(cached_->Stats().kv_pages_used, 0u);
  // The cached blocks stayed intact: the base prompt again reuses all but its last token.
  auto again = cached_->GenerateBlocking(Req(base, 1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->prefilled_tokens, 1u);
}

TEST_F(PrefixCacheEngineTest, KeptSequenceSharesItsBlocksWhileLive) {
  GenerateRequest kept = Req(Ids(64, 4), 2, 4);
  kept.keep_state = true;
  auto k = cached_->GenerateBlocking(kept);
  ASSERT_TRUE(k.ok());
  std::vector<int32_t> other = Ids(64, 4);
  for (int32_t t : Ids(5, 6)) other.push_back(t);
  auto with = cached_->GenerateBlocking(Req(other, 7));
  auto without = engine_->GenerateBlocking(Req(other, 7));
  ASSERT_TRUE(with.ok() && without.ok());
  // Blocks 0-3 are final in the kept sequence (64 of its 67 cached positions; the last one
  // may be computed again); its partial block 4 is not shared while it lives.
  EXPECT_EQ(with->prefilled_tokens, 69u - 64u);
  ExpectSame(with->tokens, without->tokens);
  // The kept sequence goes on over the shared blocks.
  GenerateRequest more = Req({1, 2, 3}, 9, 3);
  more.sequence_id = k->sequence_id;
  more.keep_state = true;
  auto cont = cached_->GenerateBlocking(more);
  ASSERT_TRUE(cont.ok()) << cont.status();
  EXPECT_EQ(cont->prefilled_tokens, 3u);
  ASSERT_TRUE(cached_->Release(k->sequence_id).ok());
  EXPECT_EQ(cached_->Stats().kv_pages_used, 0u);
}

TEST_F(PrefixCacheEngineTest, CachedPagesAreEvictedUnderMemoryPressure) {
  // 60 pages of 16 positions (2 layers x K/V x 16 x 32 floats = 8 KiB each).
  EngineOptions opts;
  opts.threads = 2;
  opts.kv_memory_bytes = 60 * 8192;
  auto e = Engine::Create(opts);
  ASSERT_TRUE(e.ok());
  std::unique_ptr<Engine> small = std::move(*e);
  ASSERT_TRUE(small->LoadModel("student", config_, v1_, 1).ok());
  ASSERT_EQ(small->Stats().kv_pages_total, 60u);
  // Each prompt takes 20 pages (312 prompt + 1 generated position): the fourth and fifth
  // evict the first two.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(small->GenerateBlocking(Req(Ids(312, 20 + i), 1, 2)).ok()) << i;
  EXPECT_EQ(small->Stats().kv_pages_used, 0u);
  EXPECT_EQ(small->Stats().kv_pages_cached, 60u);
  auto recent = small->GenerateBlocking(Req(Ids(312, 24), 1, 2));
  ASSERT_TRUE(recent.ok());
  EXPECT_EQ(recent->prefilled_tokens, 1u);
  auto oldest = small->GenerateBlocking(Req(Ids(312, 20), 1, 2));
  ASSERT_TRUE(oldest.ok());
  EXPECT_EQ(oldest->prefilled_tokens, 312u);
}

}  // namespace
}  // namespace flotilla::inference
