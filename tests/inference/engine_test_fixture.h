// A CPU engine over a small random model written to a temp dir, and a blocking helper for
// sink-based calls.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "flotilla/common/clock.h"
#include "flotilla/inference/engine.h"
#include "flotilla/inference/tokenizer.h"
#include "gtest/gtest.h"
#include "test_model.h"
#include "testing/temp_dir.h"

namespace flotilla::inference::testing {

struct Collected {
  std::vector<TokenRecord> tokens;
  FinishReason finish = FinishReason::kRunning;
  uint32_t prefilled = 0;
  absl::Notification done;
  TokenSink Sink() {
    return [this](const GenerateUpdate& u) {
      tokens.insert(tokens.end(), u.tokens.begin(), u.tokens.end());
      if (u.finish != FinishReason::kRunning) {
        finish = u.finish;
        prefilled = u.prefilled_tokens;
        done.Notify();
      }
    };
  }
};

// A sampled request (temperature 0.8, no stop token) whose sequence is kept after it ends.
inline GenerateRequest KeptRequest(uint32_t max_new, uint64_t seed) {
  GenerateRequest req;
  req.prompt = Encode("interrupt me at any token");
  req.sampling.temperature = 0.8f;
  req.sampling.seed = seed;
  req.sampling.max_new_tokens = max_new;
  req.sampling.stop_tokens = {-1};
  req.keep_state = true;
  return req;
}

class EngineFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = TinyConfig();
    v1_ = dir_.file("v1.safetensors");
    v2_ = dir_.file("v2.safetensors");
    ASSERT_TRUE(WriteRandomModel(v1_, config_, 1, 0.1f).ok());
    ASSERT_TRUE(WriteRandomModel(v2_, config_, 2, 0.1f).ok());
    EngineOptions opts;
    opts.threads = 2;
    opts.kv_memory_bytes = 8 << 20;
    opts.state_dir = dir_.file("states");
    opts.clock = &clock_;
    // These tests compare runs bit for bit. A prefix-cache hit runs a prompt's remaining rows
    // in GEMMs of another row count, which OpenBLAS rounds differently, so they run without
    // it (prefix_cache_test.cc covers the cache).
    opts.prefix_cache = false;
    if (const char* overlap = std::getenv("FLOTILLA_TEST_OVERLAP_DELIVERY")) opts.overlap_delivery = std::atoi(overlap);
    auto e = Engine::Create(opts);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
    ASSERT_TRUE(engine_->LoadModel("student", config_, v1_, 1).ok());
  }

  GenerateRequest Request(uint32_t max_new, uint64_t seed) const { return KeptRequest(max_new, seed); }

  flotilla::testing::TempDir dir_;
  FakeClock clock_;
  ModelConfig config_;
  std::string v1_, v2_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace flotilla::inference::testing
