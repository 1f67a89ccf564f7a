// The RolloutRunner on the real engine, every sample a single-turn worker episode in its own
// sandbox: checkpoint switches across three versions inside one model turn (routing and
// versions concatenated exactly as the engine emitted them, checked against the PyTorch
// reference), no re-prefill on resume, and offload/reload on trainer preemption.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "flotilla/app/embedded_node.h"
#include "flotilla/inference/engine.h"
#include "flotilla/trainer_bridge/rollout_runner.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

std::string SourceDir() {
  const char* s = std::getenv("FLOTILLA_SOURCE_DIR");
  return s == nullptr ? "." : s;
}

std::string Shell(const std::string& cmd, int* code) { return flotilla::testing::RunShell(cmd, code); }

std::string Python() {
  return "PYTHONPATH='" + SourceDir() + "/trainer_bridge/python:" + SourceDir() + "/tests/trainer_bridge' /usr/bin/python3 ";
}

inference::ModelConfig Tiny() {
  inference::ModelConfig c;
  c.n_layers = 2;
  c.d_model = 64;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.head_dim = 32;
  c.n_experts = 4;
  c.top_k = 2;
  c.expert_hidden = 64;
  c.max_context = 1024;
  return c;
}

class RunnerEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    app::EmbeddedNodeOptions no;
    no.state_dir = dir_.file("sandboxes");
    // A cgroup parent of its own per test: the previous test's runtime may still be taking
    // its parent down when the next one starts.
    static int fixture = 0;
    no.cgroup_prefix = "flotilla-runner-test-" + std::to_string(::getpid()) + "-" + std::to_string(++fixture);
    // The samples' sandboxes are idle while the model writes: charged a tenth of a core each.
    no.admission.default_cpu_millicores = 100;
    no.admission.default_memory_bytes = 256ull << 20;
    auto node = app::EmbeddedNode::Start(no);
    if (!node.ok()) GTEST_SKIP() << "sandboxes unavailable here: " << node.status();
    node_ = std::move(*node);
    sandboxes_ = std::make_unique<worker::SandboxClient>(node_->channel());
    std::ofstream(dir_.file("cfg.json")) << Tiny().ToJson();
    int code = 0;
    std::string out = Shell(Python() + "-c \"import sys; from flotilla_trainer.model import *; "
                                       "from flotilla_trainer.safetensors_io import save_file; c=ModelConfig.from_json(open('" +
                                dir_.file("cfg.json") + "').read()); [save_file(init_weights(Transformer(c), seed=s, std=0.5).export_state(), '" +
                                dir_.path().string() + "/v%d.safetensors' % s) for s in range(3)]\" 2>&1",
                            &code);
    ASSERT_EQ(code, 0) << out;
    inference::EngineOptions eo;
    eo.threads = 1;
    auto e = inference::Engine::Create(eo);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
    ASSERT_TRUE(engine_->LoadModel("policy", Tiny(), dir_.file("v0.safetensors"), 0).ok());
  }

  std::unique_ptr<RolloutRunner> MakeRunner(RolloutController& c, uint32_t length) {
    std::map<std::string, std::unique_ptr<TaskSource>> tasks;
    tasks["d"] = std::move(*TaskSource::Open("builtin:copy?len=6", 1));
    RunnerOptions o;
    o.model = "policy";
    o.experiment = "runner-test";
    o.sandbox_policy = "no-network";
    o.episodes = 2;
    o.routing_width = Tiny().routing_width();
    o.forced_length = [length](uint64_t) { return length; };
    return std::make_unique<RolloutRunner>(o, *engine_, c, std::move(tasks), *sandboxes_, nullptr, clock_);
  }

  // Waits (up to two minutes, for loaded CI machines) until both samples are generating and each
  // has at least `floor` completion tokens; fails the test rather than going on with a switch
  // that came too early. Returns the fewest tokens any sample had at that moment.
  uint32_t WaitEach(RolloutRunner& r, uint32_t floor) {
    for (int i = 0; i < 60000; ++i) {
      RunnerStats s = r.Stats();
      if (s.generating == 2 && s.min_generating_tokens >= floor) return s.min_generating_tokens;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ADD_FAILURE() << "timed out waiting for two generating samples of " << floor << " tokens each";
    return 0;
  }

  testing::TempDir dir_;
  SystemClock clock_;
  std::unique_ptr<app::EmbeddedNode> node_;
  std::unique_ptr<worker::SandboxClient> sandboxes_;
  std::unique_ptr<inference::Engine> engine_;
};

RolloutConfig OneGroup() {
  RolloutConfig r;
  r.group_size = 2;
  r.max_in_flight = 2;
  r.staleness = 0;  // exactly one group until version 1
  r.groups_per_step = 1;
  r.length_bias.enabled = false;
  return r;
}

TEST_F(RunnerEngineTest, RoutingConcatenatesAcrossThreeVersions) {
  constexpr uint32_t kLength = 900;
  RolloutController c(OneGroup(), {DatasetConfig{"d", "builtin:copy", "d", 1, 0}}, {}, clock_);
  // Long samples leave a wide margin for both switches to land mid-sample on a loaded machine.
  auto runner = MakeRunner(c, kLength);
  ASSERT_TRUE(runner->Start().ok());
  const uint32_t behind = WaitEach(*runner, 20);
  auto s1 = runner->SwitchWeights(dir_.file("v1.safetensors"), 1);
  ASSERT_TRUE(s1.ok()) << s1.status();
  c.SetSuspended(true);  // keep the next group (allowed by version 1) from starting
  EXPECT_EQ(s1->interrupted, 2u);
  EXPECT_EQ(s1->prefilled_on_resume, 0u);
  // Every sample needs tokens of its own under version 1 before the next switch. Counted from
  // the sample that is behind: the two may have started hundreds of tokens apart (their
  // sandboxes came up at different times), and the one ahead must not finish first.
  WaitEach(*runner, std::max(behind, runner->Stats().min_generating_tokens) + 20);
  auto s2 = runner->SwitchWeights(dir_.file("v2.safetensors"), 2);
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_EQ(s2->interrupted, 2u);
  auto groups = runner->TakeGroups(1, nullptr);
  ASSERT_EQ(groups.size(), 1u);
  ASSERT_EQ(groups[0].size(), 2u);
  EXPECT_EQ(runner->Stats().resumed_prefill_tokens, 0u);
  for (const RolloutSample& s : groups[0]) {
    // The reply's generated tokens, then the end-of-turn the session closes a length-cut turn
    // with (context: never trained on) — none when the last token drawn is itself the
    // end-of-turn (about one run in a hundred with this random model).
    ASSERT_EQ(s.GeneratedTokens(), kLength) << s.failed << " " << s.detail;
    ASSERT_GE(s.completion.size(), kLength);
    ASSERT_LE(s.completion.size(), kLength + 1);
    EXPECT_EQ(s.loss_mask.back(), s.completion.size() == kLength ? 1 : 0);
    EXPECT_EQ(s.segments, 3u);
    EXPECT_EQ(s.routing.size(), s.completion.size() * 4);
    const std::vector<int32_t> completion(s.completion.begin(), s.completion.begin() + kLength);
    const std::vector<int64_t> versions(s.versions.begin(), s.versions.begin() + kLength);
    const std::vector<int32_t> routing(s.routing.begin(), s.routing.begin() + size_t{kLength} * 4);
    const std::vector<float> logprobs(s.logprobs.begin(), s.logprobs.begin() + kLength);
    EXPECT_EQ(versions.front(), 0);
    EXPECT_EQ(versions.back(), 2);
    EXPECT_TRUE(std::is_sorted(versions.begin(), versions.end()));
    EXPECT_NE(std::find(versions.begin(), versions.end(), 1), versions.end());
    nlohmann::json j = {{"prompt", s.prompt}, {"completion", completion}, {"versions", versions},
                        {"routing", routing}, {"logprobs", logprobs}};
    std::ofstream(dir_.file("sample.json")) << j.dump();
    int code = 0;
    std::string out = Shell(Python() + SourceDir() + "/tests/trainer_bridge/routing_check.py " + dir_.file("cfg.json") +
                                " " + dir_.file("sample.json") + " " + dir_.file("v0.safetensors") + " " +
                                dir_.file("v1.safetensors") + " " + dir_.file("v2.safetensors") + " 2>&1",
                            &code);
    ASSERT_EQ(code, 0) << out;
    ASSERT_NE(out.find(absl::StrCat("rows=", kLength, " mismatched_rows=")), std::string::npos) << out;
    // The recorded routing replayed reproduces every logprob; the reference router, choosing
    // freely, picks the recorded experts on every row but a rare near tie (about one sample in
    // twenty has one such row of 900).
    const int mismatched = std::stoi(out.substr(out.find("mismatched_rows=") + 16));
    EXPECT_LE(mismatched, 2) << out;
    double err = std::stod(out.substr(out.find("max_logprob_err=") + 16));
    EXPECT_LT(err, 1e-3) << out;
  }
  runner->Stop();
}

TEST_F(RunnerEngineTest, OffloadAndReloadWithoutRePrefill) {
  RolloutController c(OneGroup(), {DatasetConfig{"d", "builtin:copy", "d", 1, 0}}, {}, clock_);
  constexpr uint32_t kLength = 900;  // both samples overlap although their sandboxes start apart
  auto runner = MakeRunner(c, kLength);
  ASSERT_TRUE(runner->Start().ok());
  WaitEach(*runner, 20);
  ASSERT_TRUE(runner->Offload().ok());
  RunnerStats st = runner->Stats();
  EXPECT_EQ(st.offloaded, 2u);
  EXPECT_EQ(st.generating, 0u);
  EXPECT_EQ(engine_->Stats().active_sequences, 0u);  // the KV cache is empty while offloaded
  EXPECT_TRUE(c.Stats().suspended);
  uint64_t tokens = st.tokens_generated;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(runner->Stats().tokens_generated, tokens);  // nothing runs while the trainer is gone
  ASSERT_TRUE(runner->Reload().ok());
  EXPECT_FALSE(c.Stats().suspended);
  auto groups = runner->TakeGroups(1, nullptr);
  ASSERT_EQ(groups.size(), 1u);
  for (const auto& s : groups[0]) {
    EXPECT_FALSE(s.failed) << s.detail;
    EXPECT_EQ(s.GeneratedTokens(), kLength);
    EXPECT_EQ(s.segments, 1u);  // one policy version throughout
  }
  EXPECT_EQ(runner->Stats().resumes, 2u);  // each sample resumed once, from its saved state
  EXPECT_EQ(runner->Stats().resumed_prefill_tokens, 0u);
  runner->Stop();
}

// A switch stages the file before interrupting anything: a bad one is refused with every
// sample still generating on the old weights in one segment.
TEST_F(RunnerEngineTest, BadWeightsAreRefusedBeforeAnyInterrupt) {
  RolloutController c(OneGroup(), {DatasetConfig{"d", "builtin:copy", "d", 1, 0}}, {}, clock_);
  // Long enough that both samples still generate together when one sandbox comes up seconds
  // after the other (a cold start on a loaded machine); 300 tokens could finish first.
  constexpr uint32_t kLength = 900;
  auto runner = MakeRunner(c, kLength);
  ASSERT_TRUE(runner->Start().ok());
  WaitEach(*runner, 20);
  std::ofstream(dir_.file("bad.safetensors"), std::ios::binary) << std::string("\x08\0\0\0\0\0\0\0nonsense", 16);
  auto bad = runner->SwitchWeights(dir_.file("bad.safetensors"), 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*engine_->PolicyVersion("policy"), 0);
  auto groups = runner->TakeGroups(1, nullptr);
  ASSERT_EQ(groups.size(), 1u);
  for (const RolloutSample& s : groups[0]) {
    EXPECT_FALSE(s.failed) << s.detail;
    EXPECT_EQ(s.GeneratedTokens(), kLength);
    EXPECT_EQ(s.segments, 1u);
    EXPECT_EQ(s.MaxVersion(), 0);
  }
  runner->Stop();
}

}  // namespace
}  // namespace flotilla::trainer_bridge
