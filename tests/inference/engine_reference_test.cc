// The CPU engine against the PyTorch reference (trainer_bridge/python/flotilla_trainer) on the
// same safetensors file: logprobs within 1e-4, identical greedy tokens and expert ids.
#include <cmath>
#include <fstream>
#include <thread>

#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "flotilla/inference/chat_template.h"
#include "flotilla/inference/engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_model.h"
#include "testing/temp_dir.h"

namespace flotilla::inference {
namespace {

using testing::RunReference;
using testing::TinyConfig;

struct Reference {
  std::vector<std::vector<double>> logprobs;  // per position, full vocab
  std::vector<std::vector<int32_t>> experts;  // per position, L*k
};

// One reference run over several sequences (each scored on its own).
std::vector<Reference> ScoreAll(const std::string& config, const std::string& weights,
                                const std::vector<std::vector<int32_t>>& seqs) {
  std::vector<std::string> parts;
  for (const auto& ids : seqs) parts.push_back(absl::StrJoin(ids, ","));
  auto out = RunReference("score '" + config + "' '" + weights + "' '" + absl::StrJoin(parts, ";") + "'");
  std::vector<Reference> refs(seqs.size());
  nlohmann::json j = nlohmann::json::parse(out.value_or(""), nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.size() != seqs.size()) {
    ADD_FAILURE() << "reference failed";
    return refs;
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    refs[i].logprobs = j[i]["logprobs"].get<std::vector<std::vector<double>>>();
    refs[i].experts = j[i]["experts"].get<std::vector<std::vector<int32_t>>>();
  }
  return refs;
}

class EngineReferenceTest : public ::testing::Test {
 protected:
  // The reference writes the model once for the suite (Python start-up is slow).
  static void SetUpTestSuite() {
    dir_ = new flotilla::testing::TempDir();
    config_path_ = dir_->file("m.json");
    weights_path_ = dir_->file("m.safetensors");
    std::ofstream(config_path_) << TinyConfig().ToJson();
    written_ = RunReference("init '" + config_path_ + "' '" + weights_path_ + "' 7 0.1").has_value();
  }
  static void TearDownTestSuite() { delete dir_; }

  void SetUp() override {
    ASSERT_TRUE(written_) << "the PyTorch reference could not write the model";
    config_ = TinyConfig();
    EngineOptions opts;
    opts.threads = 2;
    opts.kv_memory_bytes = 16 << 20;
    auto e = Engine::Create(opts);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
    ASSERT_TRUE(engine_->LoadModel("student", config_, weights_path_, 3).ok());
  }

  // Every generated token of `seq` (after `prompt`) agrees with the reference.
  std::vector<int32_t> Joined(const std::vector<int32_t>& prompt, const std::vector<TokenRecord>& gen) {
    std::vector<int32_t> ids = prompt;
    for (const TokenRecord& r : gen) ids.push_back(r.token);
    return ids;
  }
  void ExpectMatches(const std::vector<int32_t>& prompt, const std::vector<TokenRecord>& gen,
                     const Reference& ref, bool greedy) {
    const std::vector<int32_t> ids = Joined(prompt, gen);
    ASSERT_EQ(ref.logprobs.size(), ids.size());
    for (size_t i = 0; i < gen.size(); ++i) {
      const size_t pos = prompt.size() + i - 1;  // the position whose logits chose token i
      const auto& lp = ref.logprobs[pos];
      EXPECT_NEAR(gen[i].logprob, lp[gen[i].token], 1e-4) << "token " << i;
      if (greedy) {
        EXPECT_EQ(gen[i].token, std::max_element(lp.begin(), lp.end()) - lp.begin()) << "token " << i;
      }
      EXPECT_EQ(gen[i].experts, ref.experts[pos]) << "token " << i;
      EXPECT_EQ(gen[i].policy_version, 3);
    }
  }

  static flotilla::testing::TempDir* dir_;
  static std::string config_path_, weights_path_;
  static bool written_;
  ModelConfig config_;
  std::unique_ptr<Engine> engine_;
};
flotilla::testing::TempDir* EngineReferenceTest::dir_ = nullptr;
std::string EngineReferenceTest::config_path_;
std::string EngineReferenceTest::weights_path_;
bool EngineReferenceTest::written_ = false;

TEST_F(EngineReferenceTest, GreedyTokensLogprobsAndExpertsMatch) {
  std::vector<int32_t> prompt = RenderConversation({{ChatMessage::Role::kUser, "list the files", {}, ""}}, true);
  GenerateRequest req;
  req.prompt = prompt;
  req.sampling.temperature = 0;
  req.sampling.max_new_tokens = 20;
  req.sampling.stop_tokens = {-1};
  auto res = engine_->GenerateBlocking(req);
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(res->tokens.size(), 20u);
  EXPECT_EQ(res->finish, FinishReason::kLength);
  EXPECT_EQ(res->prefilled_tokens, prompt.size());
  auto refs = ScoreAll(config_path_, weights_path_, {Joined(prompt, res->tokens)});
  ExpectMatches(prompt, res->tokens, refs[0], /*greedy=*/true);
}

TEST_F(EngineReferenceTest, BatchedSampledSequencesMatch) {
  constexpr int kSeqs = 4;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<TokenRecord>> got(kSeqs);
  std::vector<absl::Notification> done(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    prompts.push_back(Encode(std::string(3 + 5 * s, static_cast<char>('a' + s))));
    GenerateRequest req;
    req.prompt = prompts[s];
    req.sampling.temperature = 1.0f;
    req.sampling.top_p = 0.9f;
    req.sampling.seed = 100 + s;
    req.sampling.max_new_tokens = 12;
    req.sampling.stop_tokens = {-1};
    req.sampling.top_logprobs = 3;
    ASSERT_TRUE(engine_->Generate(req, [&, s](const GenerateUpdate& u) {
      got[s].insert(got[s].end(), u.tokens.begin(), u.tokens.end());
      if (u.finish != FinishReason::kRunning) done[s].Notify();
    }).ok());
  }
  for (auto& d : done) d.WaitForNotification();
  std::vector<std::vector<int32_t>> seqs;
  for (int s = 0; s < kSeqs; ++s) seqs.push_back(Joined(prompts[s], got[s]));
  auto refs = ScoreAll(config_path_, weights_path_, seqs);
  for (int s = 0; s < kSeqs; ++s) {
    ASSERT_EQ(got[s].size(), 12u);
    ASSERT_EQ(got[s][0].top_ids.size(), 3u);
    EXPECT_GE(got[s][0].top_logprobs[0], got[s][0].logprob);
    ExpectMatches(prompts[s], got[s], refs[s], /*greedy=*/false);
  }
}

TEST_F(EngineReferenceTest, ScoreMatchesReferenceOnBf16File) {
  const std::string bf16 = dir_->file("bf16.safetensors");
  ASSERT_TRUE(testing::WriteRandomModel(bf16, config_, 11, 0.1f, DType::kBF16).ok());
  ASSERT_TRUE(engine_->LoadModel("teacher", config_, bf16, 1).ok());
  std::vector<int32_t> ids = Encode("the quick brown fox jumps");
  auto res = engine_->Score("teacher", ids, 2, 4, true);
  ASSERT_TRUE(res.ok()) << res.status();
  Reference ref = ScoreAll(config_path_, bf16, {ids})[0];
  const size_t n = ids.size() - 2;
  ASSERT_EQ(res->logprobs.size(), n);
  ASSERT_EQ(res->top_ids.size(), n * 4);
  ASSERT_EQ(res->full_logprobs.size(), n * config_.vocab_size);
  for (size_t i = 0; i < n; ++i) {
    const auto& lp = ref.logprobs[i + 1];
    EXPECT_NEAR(res->logprobs[i], lp[ids[i + 2]], 1e-4);
    EXPECT_EQ(res->top_ids[i * 4], std::max_element(lp.begin(), lp.end()) - lp.begin());
    for (int v = 0; v < config_.vocab_size; v += 17) EXPECT_NEAR(res->full_logprobs[i * config_.vocab_size + v], lp[v], 1e-4);
  }
}

// A model without a shared expert: the reference writes no shared tensors, the engine expects
// none, and both compute the same distribution.
TEST(NoSharedExpertTest, ReferenceWritesWhatTheEngineLoadsAndBothAgree) {
  flotilla::testing::TempDir dir;
  ModelConfig c = TinyConfig();
  c.n_shared_experts = 0;
  const std::string config = dir.file("m.json"), weights = dir.file("m.safetensors");
  std::ofstream(config) << c.ToJson();
  ASSERT_TRUE(RunReference("init '" + config + "' '" + weights + "' 3 0.1").has_value());
  EngineOptions opts;
  opts.threads = 1;
  auto e = Engine::Create(opts);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::Status loaded = (*e)->LoadModel("m", c, weights, 0);
  ASSERT_TRUE(loaded.ok()) << loaded;
  std::vector<int32_t> ids = Encode("no shared expert");
  auto res = (*e)->Score("m", ids, 1, 0, true);
  ASSERT_TRUE(res.ok()) << res.status();
  Reference ref = ScoreAll(config, weights, {ids})[0];
  ASSERT_EQ(res->full_logprobs.size(), (ids.size() - 1) * c.vocab_size);
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    for (int v = 0; v < c.vocab_size; v += 13) {
      EXPECT_NEAR(res->full_logprobs[i * c.vocab_size + v], ref.logprobs[i][v], 1e-4) << i << " " << v;
    }
  }
}

TEST(ChatTemplateCrossLanguageTest, PythonRendersTheSameIds) {
  std::vector<ChatMessage> msgs = {
      {ChatMessage::Role::kSystem, "be brief", {}, ""},
      {ChatMessage::Role::kUser, "hi \xc3\xa9", {}, ""},
      {ChatMessage::Role::kAssistant, "ok", {{"call_0", "ls", "{\"path\":\"/\"}"}}, ""},
      {ChatMessage::Role::kTool, "a b", {}, "call_0"},
  };
  std::string out = RunReference("render").value_or("");
  while (!out.empty() && out.back() == '\n') out.pop_back();
  EXPECT_EQ(out, absl::StrJoin(RenderConversation(msgs, true), ","));
}

}  // namespace
}  // namespace flotilla::inference
