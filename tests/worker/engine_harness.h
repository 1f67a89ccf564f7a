// A worker over the real CPU engine with a small random-init model, as integration tests use
// it: engine, recording generator, chat service with a SQLite trajectory store, HTTP server.
#pragma once

#include <memory>
#include <string>

#include "flotilla/inference/engine.h"
#include "flotilla/worker/chat_service.h"
#include "flotilla/worker/wire_api.h"
#include "gtest/gtest.h"
#include "inference/test_model.h"
#include "recording_generator.h"
#include "testing/temp_dir.h"

namespace flotilla::worker::testing {

inline inference::ModelConfig SmallConfig() {
  inference::ModelConfig c;
  c.n_layers = 2;
  c.d_model = 64;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.n_experts = 4;
  c.top_k = 2;
  c.n_shared_experts = 1;
  c.expert_hidden = 64;
  c.max_context = 8192;
  return c;
}

class EngineHarness {
 public:
  static constexpr int64_t kPolicyVersion = 3;

  // Call from a test body (uses gtest assertions).
  void Start(const flotilla::testing::TempDir& dir, std::string scaffold = "api") {
    config_ = SmallConfig();
    const std::string weights = dir.file("model.safetensors");
    ASSERT_TRUE(inference::testing::WriteRandomModel(weights, config_, 5, 0.5f).ok());
    inference::EngineOptions opts;
    opts.threads = 2;
    opts.kv_memory_bytes = 64ull << 20;
    auto engine = inference::Engine::Create(opts);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    ASSERT_TRUE(engine_->LoadModel("default", config_, weights, kPolicyVersion).ok());
    inner_ = NewEngineTokenGenerator(engine_.get(), "default", "flotilla-test");
    recorder_ = std::make_unique<RecordingGenerator>(inner_.get());
    auto store = TrajectoryStore::Open(dir.file("trajectories.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    ChatServiceOptions o;
    o.store = store_.get();
    o.experiment = "exp-test";
    o.scaffold = scaffold;
    o.experts_per_token = config_.routing_width();
    service_ = std::make_unique<ChatService>(recorder_.get(), o);
    api_ = std::make_unique<WireApi>(service_.get());
    auto server = ServeWireApi("127.0.0.1:0", api_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  ~EngineHarness() {
    if (server_) server_->Stop();
  }

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  inference::Engine& engine() { return *engine_; }
  RecordingGenerator& recorder() { return *recorder_; }
  TrajectoryStore& store() { return *store_; }
  ChatService& service() { return *service_; }
  const inference::ModelConfig& config() const { return config_; }

 private:
  inference::ModelConfig config_;
  std::unique_ptr<inference::Engine> engine_;
  std::unique_ptr<TokenGenerator> inner_;
  std::unique_ptr<RecordingGenerator> recorder_;
  std::unique_ptr<TrajectoryStore> store_;
  std::unique_ptr<ChatService> service_;
  std::unique_ptr<WireApi> api_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace flotilla::worker::testing
