// Teacher-forced log-probs, argmax and routing of every Hugging Face fixture against the
// goldens transformers computed (scripts/make_hf_fixtures.py), and routing replay.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "flotilla/inference/engine.h"
#include "flotilla/inference/hf_model.h"
#include "gtest/gtest.h"
#include "inference/hf_fixtures.h"

namespace flotilla::inference {
namespace {

using testing::HfFixtureNames;
using testing::HfFixtureRoot;

constexpr double kTolerance = 1e-4;

std::map<std::string, double>& MaxErrorByFamily() {
  static std::map<std::string, double> m;
  return m;
}

class HfGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(HfGolden, LogprobsTop1AndRoutingMatchTransformers) {
  const std::string dir = HfFixtureRoot() + "/" + GetParam();
  auto model = HfModel::Load(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const HfConfig& c = (*model)->config();
  const nlohmann::json golden = testing::ReadJsonFile(dir + "/golden.json");
  ASSERT_TRUE(golden.contains("sequences")) << dir;
  std::vector<int> moe_layers;
  for (int l = 0; l < c.num_layers; ++l) {
    if (c.moe_layer[l]) moe_layers.push_back(l);
  }
  double max_err = 0;
  for (const auto& seq : golden["sequences"]) {
    const std::vector<int32_t> ids = seq["ids"].get<std::vector<int32_t>>();
    const std::vector<double> want = seq["logprob"].get<std::vector<double>>();
    const std::vector<int32_t> top1 = seq["top1"].get<std::vector<int32_t>>();
    auto score = (*model)->Score(ids, {}, 2);
    ASSERT_TRUE(score.ok()) << score.status();
    ASSERT_EQ(score->logprob.size(), want.size());
    for (size_t t = 0; t < want.size(); ++t) {
      max_err = std::max(max_err, std::abs(score->logprob[t] - want[t]));
      EXPECT_NEAR(score->logprob[t], want[t], kTolerance) << GetParam() << " t=" << t;
      EXPECT_EQ(score->top1[t], top1[t]) << GetParam() << " t=" << t;
    }
    // Routing: the same set of experts for every token in every MoE layer.
    const auto& experts = seq["experts"];
    ASSERT_EQ(experts.size(), moe_layers.size()) << GetParam();
    const int M = static_cast<int>(moe_layers.size()), K = c.top_k;
    for (int m = 0; m < M; ++m) {
      const auto want_rows = experts[std::to_string(moe_layers[m])].get<std::vector<std::vector<int32_t>>>();
      ASSERT_EQ(want_rows.size(), ids.size());
      for (size_t t = 0; t < ids.size(); ++t) {
        std::vector<int32_t> got(score->experts.begin() + (t * M + m) * K, score->experts.begin() + (t * M + m + 1) * K);
        std::sort(got.begin(), got.end());
        EXPECT_EQ(got, want_rows[t]) << GetParam() << " layer " << moe_layers[m] << " t=" << t;
      }
    }
  }
  double& fam = MaxErrorByFamily()[c.model_type];
  fam = std::max(fam, max_err);
  std::cout << "hf_golden " << GetParam() << " model_type=" << c.model_type << " max_abs_logprob_error=" << max_err
            << "\n";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfGolden, ::testing::ValuesIn(HfFixtureNames()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(HfGoldenSet, CoversEveryFamily) {
  std::map<std::string, int> per_family;
  for (const std::string& name : HfFixtureNames()) {
    auto c = HfConfig::FromDir(HfFixtureRoot() + "/" + name);
    ASSERT_TRUE(c.ok()) << c.status();
    ++per_family[c->model_type];
  }
  for (const char* f : {"qwen3_moe", "qwen3", "llama", "mixtral", "olmoe", "qwen2_moe", "deepseek_v3"}) {
    EXPECT_GE(per_family[f], 2) << f;
  }
}

// Replaying the routing a pass captured gives the same log-probs; replaying another routing
// uses exactly those experts and changes them.
TEST(HfReplay, ForcedExpertsAreUsed) {
  for (const char* name : {"qwen3_moe_a", "deepseek_v3_qlora", "mixtral_a"}) {
    const std::string dir = HfFixtureRoot() + "/" + name;
    auto model = HfModel::Load(dir);
    ASSERT_TRUE(model.ok()) << model.status();
    const HfConfig& c = (*model)->config();
    const nlohmann::json golden = testing::ReadJsonFile(dir + "/golden.json");
    const std::vector<int32_t> ids = golden["sequences"][0]["ids"].get<std::vector<int32_t>>();
    auto free_run = (*model)->Score(ids);
    ASSERT_TRUE(free_run.ok()) << free_run.status();
    auto same = (*model)->Score(ids, free_run->experts);
    ASSERT_TRUE(same.ok()) << same.status();
    EXPECT_EQ(same->logprob, free_run->logprob) << name;
    EXPECT_EQ(same->experts, free_run->experts) << name;
    // Shift every choice to the next expert ids (still distinct within a token).
    std::vector<int32_t> other = free_run->experts;
    for (int32_t& e : other) e = (e + 1) % c.num_experts;
    auto forced = (*model)->Score(ids, other);
    ASSERT_TRUE(forced.ok()) << forced.status();
    EXPECT_EQ(forced->experts, other) << name;
    double diff = 0;
    for (size_t t = 0; t < forced->logprob.size(); ++t) diff += std::abs(forced->logprob[t] - free_run->logprob[t]);
    EXPECT_GT(diff, 1e-3) << name;
    std::vector<int32_t> bad = free_run->experts;
    bad[0] = c.num_experts;
    EXPECT_FALSE((*model)->Score(ids, bad).ok()) << name;
    bad.pop_back();
    EXPECT_FALSE((*model)->Score(ids, bad).ok()) << name;
  }
}

class PrintErrors : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [family, err] : MaxErrorByFamily()) {
      std::cout << "hf_golden family=" << family << " max_abs_logprob_error=" << err << "\n";
    }
  }
};
const auto* const kPrintErrors = ::testing::AddGlobalTestEnvironment(new PrintErrors);

}  // namespace
}  // namespace flotilla::inference

namespace flotilla::inference {
namespace {

// The engine serves a checkpoint folder: its scoring (paged KV, prefill in chunks of 16 rows)
// gives transformers' log-probs, and generation records the MoE layers' routing.
TEST(HfEngine, ScoreAndGenerateThroughTheEngine) {
  const std::string dir = HfFixtureRoot() + "/qwen3_moe_sparse";
  EngineOptions options;
  options.threads = 2;
  options.kv_page_tokens = 8;
  options.kv_memory_bytes = 8 << 20;
  options.max_step_tokens = 16;
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->LoadHfModel("m", dir, 3).ok());
  auto config = (*engine)->Config("m");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->max_context, 256);
  const nlohmann::json golden = testing::ReadJsonFile(dir + "/golden.json");
  const auto& seq = golden["sequences"][0];
  const std::vector<int32_t> ids = seq["ids"].get<std::vector<int32_t>>();
  const std::vector<double> want = seq["logprob"].get<std::vector<double>>();
  auto score = (*engine)->Score("m", ids, 1, 1, false);
  ASSERT_TRUE(score.ok()) << score.status();
  ASSERT_EQ(score->logprobs.size(), want.size());
  for (size_t t = 0; t < want.size(); ++t) EXPECT_NEAR(score->logprobs[t], want[t], kTolerance) << t;
  GenerateRequest req;
  req.model = "m";
  req.prompt.assign(ids.begin(), ids.begin() + 20);
  req.sampling.temperature = 0;
  req.sampling.max_new_tokens = 4;
  req.sampling.stop_tokens = {-1};
  auto gen = (*engine)->GenerateBlocking(req);
  ASSERT_TRUE(gen.ok()) << gen.status();
  ASSERT_EQ(gen->tokens.size(), 4u);
  EXPECT_EQ(gen->tokens[0].token, seq["top1"][19].get<int32_t>());
  const auto& model_config = HfConfig::FromDir(dir);
  ASSERT_TRUE(model_config.ok());
  EXPECT_EQ(gen->tokens[0].experts.size(), static_cast<size_t>(model_config->num_moe_layers() * model_config->top_k));
  EXPECT_EQ(gen->tokens[0].policy_version, 3);
  EXPECT_FALSE((*engine)->UpdateWeights("m", dir + "/model.safetensors", 4).ok());
}

}  // namespace
}  // namespace flotilla::inference
