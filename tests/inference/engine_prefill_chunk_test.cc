// Chunked prefill: while another sequence decodes, a long prompt goes in chunks of
// EngineOptions::prefill_chunk_tokens, so the decoding sequence gets a token every step.
#include <atomic>

#include "engine_impl.h"
#include "engine_test_fixture.h"

namespace flotilla::inference {
namespace {

using testing::Collected;

class PrefillChunkTest : public testing::EngineFixture {
 protected:
  // Tokens the short sequence had when the long prompt's only token arrived.
  int TokensBeforeLongPrompt(uint32_t chunk) {
    EngineOptions opts;
    opts.threads = 2;
    opts.kv_memory_bytes = 8 << 20;
    opts.prefill_chunk_tokens = chunk;
    opts.overlap_delivery = 0;
    auto e = Engine::Create(opts);
    EXPECT_TRUE(e.ok());
    auto* impl = dynamic_cast<EngineImpl*>(e->get());
    EXPECT_NE(impl, nullptr);
    EXPECT_TRUE(impl->LoadModel("student", config_, v1_, 1).ok());
    GenerateRequest shrt;
    shrt.prompt = {5, 6, 7, 8, 9};
    shrt.sampling.max_new_tokens = 10;
    shrt.sampling.stop_tokens = {-1};
    GenerateRequest lng = shrt;
    lng.prompt.clear();
    for (int i = 0; i < 500; ++i) lng.prompt.push_back((i * 7 + 1) % 256);
    lng.sampling.max_new_tokens = 1;
    std::atomic<int> short_tokens{0}, seen{-1};
    Collected a, b;
    auto sink_a = a.Sink(), sink_b = b.Sink();
    impl->HoldSteps(true);  // both in the first step
    EXPECT_TRUE(impl->Generate(shrt, [&, sink_a](const GenerateUpdate& u) {
                      short_tokens += static_cast<int>(u.tokens.size());
                      sink_a(GenerateUpdate(u));
                    }).ok());
    EXPECT_TRUE(impl->Generate(lng, [&, sink_b](const GenerateUpdate& u) {
                      if (!u.tokens.empty()) seen = short_tokens.load();
                      sink_b(GenerateUpdate(u));
                    }).ok());
    impl->HoldSteps(false);
    a.done.WaitForNotification();
    b.done.WaitForNotification();
    EXPECT_EQ(b.prefilled, 500u);
    return seen.load();
  }
};

TEST_F(PrefillChunkTest, LongPromptDoesNotStallDecoding) {
  // 500 prompt rows in chunks of 128: four steps, the short sequence decoding in each.
  EXPECT_EQ(TokensBeforeLongPrompt(128), 4);
  // Unchunked: the whole prompt goes in the first step beside the short prompt.
  EXPECT_EQ(TokensBeforeLongPrompt(0), 1);
}

}  // namespace
}  // namespace flotilla::inference
