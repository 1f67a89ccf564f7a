// The Hugging Face families beyond qwen3 on the CUDA backend: a small random bf16 folder of each
// (hf_family_folder.h: norms and biases off their defaults) scored on the CUDA backend against
// the CPU backend's f32 on the same folder, full-vocabulary logprobs over 64 tokens within bf16
// tolerance; for the MoE families, each generated token's captured experts against the CPU
// backend's. And the transformers-made fixtures of these families (testdata/hf, f32 or FP8,
// rounded to bf16 on upload) against transformers' own log-probs. Skips without a CUDA device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu_hf_compare.h"
#include "hf_family_folder.h"
#include "hf_fixtures.h"

namespace flotilla::inference {
namespace {

using flotilla::testing::FamilyOptions;

class HfGpuFamilyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  }
  // Writes the folder, scores 64 tokens on both backends and, for a MoE family, checks the
  // routing that greedy generation captures on the GPU.
  void Check(const HfInitOptions& f, const char* what, int moe_layers) {
    const std::string out = dir_.file(what);
    const absl::Status written = flotilla::testing::WriteFamilyFolder(f, out);
    ASSERT_TRUE(written.ok()) << written;
    auto cpu = HfEngine("cpu", out);
    auto gpu = HfEngine("cuda", out);
    ASSERT_TRUE(cpu && gpu);
    ExpectScoresAgree(*cpu, *gpu, Ids(f.vocab_size), static_cast<size_t>(f.vocab_size), what);
    GenerateRequest req;
    req.prompt = Ids(f.vocab_size, 16);
    req.sampling.temperature = 0;
    req.sampling.max_new_tokens = 8;
    req.sampling.stop_tokens = {-1};
    auto c = cpu->GenerateBlocking(req);
    auto g = gpu->GenerateBlocking(req);
    ASSERT_TRUE(c.ok() && g.ok()) << g.status();
    ASSERT_EQ(g->tokens.size(), 8u);
    const size_t per_token = static_cast<size_t>(moe_layers) * (moe_layers > 0 ? f.top_k : 0);
    size_t same = 0, total = 0;
    for (size_t i = 0; i < g->tokens.size(); ++i) {
      ASSERT_EQ(g->tokens[i].experts.size(), per_token) << i;
      for (size_t k = 0; k < per_token; ++k) {
        const int32_t e = g->tokens[i].experts[k];
        EXPECT_TRUE(e >= 0 && e < f.num_experts) << e;
        same += e == c->tokens[i].experts[k];
        ++total;
      }
      if (c->tokens[i].token != g->tokens[i].token) break;  // later records route other inputs
    }
    std::printf("hf_gpu_vs_cpu %s greedy expert_agreement=%zu/%zu\n", what, same, total);
    EXPECT_GE(same * 10, total * 8);
  }
  flotilla::testing::TempDir dir_;
};

// llama3 RoPE scaling (factor 8 over an original context of 64 tokens: the 64 positions reach
// the unscaled, smoothed and scaled frequency bands) and attention_bias (q/k/v/o biases).
TEST_F(HfGpuFamilyTest, LlamaMatchesCpu) {
  HfInitOptions f = FamilyOptions("llama", 21);
  f.head_dim = 64;
  f.attention_bias = true;
  f.rope_parameters = nlohmann::json{{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}, {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}}.dump();
  Check(f, "llama", 0);
}

// Mixtral's original tensor names (block_sparse_moe, w1/w3/w2), renormalised top-2 of 8, and a
// sliding window of 24 tokens over the 64.
TEST_F(HfGpuFamilyTest, MixtralMatchesCpu) {
  HfInitOptions f = FamilyOptions("mixtral", 22);
  f.intermediate_size = 64;
  f.sliding_window = 24;
  Check(f, "mixtral", 3);
}

// OLMoE: q/k RMSNorm over the whole projections, top-3 of 8 without renormalisation.
TEST_F(HfGpuFamilyTest, OlmoeMatchesCpu) {
  HfInitOptions f = FamilyOptions("olmoe", 23);
  f.intermediate_size = 64;
  f.top_k = 3;
  f.norm_topk_prob = false;
  Check(f, "olmoe", 3);
}

// qwen2_moe: q/k/v biases, the shared expert (hidden 96) behind its sigmoid gate, a dense layer
// (mlp_only_layers [1], hidden 160), top-2 of 8 without renormalisation.
TEST_F(HfGpuFamilyTest, Qwen2MoeMatchesCpu) {
  HfInitOptions f = FamilyOptions("qwen2_moe", 24);
  f.mlp_only_layers = {1};
  f.norm_topk_prob = false;
  Check(f, "qwen2_moe", 2);
}

// qwen3 with yarn RoPE (factor 4 over an original context of 32): the inverse frequencies
// ramp and the attention factor on cos and sin.
TEST_F(HfGpuFamilyTest, Qwen3YarnMatchesCpu) {
  HfInitOptions f = FamilyOptions("qwen3", 27);
  f.head_dim = 64;
  f.rope_parameters = nlohmann::json{{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0}, {"original_max_position_embeddings", 32}}.dump();
  Check(f, "qwen3_yarn", 0);
}

// DeepSeek-V3: latent attention through q_lora (48) with kv_lora 32, nope 32 + rope 16 key
// heads and v_head_dim 24 (padded to the key width in the pages), interleaved yarn RoPE (factor
// 4, mscale 0.707 against mscale_all_dim 1: both the cos/sin factor and the softmax scale move);
// sigmoid routing with e_score_correction_bias, top-3 of 16 within the best 2 of 4 groups,
// renormalised and scaled by 2.5; one shared expert; a dense first layer.
TEST_F(HfGpuFamilyTest, DeepseekV3MatchesCpu) {
  HfInitOptions f = FamilyOptions("deepseek_v3", 25);
  f.num_experts = 16;
  f.top_k = 3;
  f.norm_topk_prob = true;
  f.rope_parameters = nlohmann::json{{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0}, {"original_max_position_embeddings", 64},
            {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"mscale", 0.707}, {"mscale_all_dim", 1.0}}.dump();
  Check(f, "deepseek_v3", 2);
}

// DeepSeek-V3 without q_lora (q_proj), RoPE by halves with the default rope, v as wide as the
// key heads, one group (plain top-2 of 8), weights not renormalised.
TEST_F(HfGpuFamilyTest, DeepseekV3WithoutQLoraMatchesCpu) {
  HfInitOptions f = FamilyOptions("deepseek_v3", 26);
  f.q_lora_rank = 0;
  f.rope_interleave = false;
  f.v_head_dim = 48;
  f.n_group = 1;
  f.topk_group = 1;
  f.routed_scaling_factor = 1.5;
  f.norm_topk_prob = false;
  Check(f, "deepseek_v3_no_q_lora", 2);
}

// DeepSeek-V3 with attention_bias: the biases of q_a_proj, kv_a_proj_with_mqa (its latent and
// rotation rows) and o_proj, as transformers' DeepseekV3Attention has them.
TEST_F(HfGpuFamilyTest, DeepseekV3AttentionBiasMatchesCpu) {
  HfInitOptions f = FamilyOptions("deepseek_v3", 28);
  f.attention_bias = true;
  f.norm_topk_prob = true;
  Check(f, "deepseek_v3_bias", 2);
}

// DeepSeek-V3's own head sizes: keys of 128 nope + 64 rope values (192) and values of 128,
// through q_lora, with attention_bias; 2 layers (a dense one, a MoE one). The prefill and the
// greedy decode both run the wide instantiation of the paged attention kernel.
TEST_F(HfGpuFamilyTest, DeepseekV3RealHeadSizesMatchCpu) {
  HfInitOptions f = FamilyOptions("deepseek_v3", 29);
  f.qk_nope_head_dim = 128;
  f.qk_rope_head_dim = 64;
  f.v_head_dim = 128;
  f.num_layers = 2;
  f.attention_bias = true;
  f.norm_topk_prob = true;
  Check(f, "deepseek_v3_192_128", 1);
}

// Key heads over the attention kernel's 256 values are refused at load, naming the fields.
TEST_F(HfGpuFamilyTest, KeyHeadsOverTheKernelsAreRefusedNamingTheFields) {
  HfInitOptions f = FamilyOptions("deepseek_v3");
  f.qk_nope_head_dim = 256;
  f.qk_rope_head_dim = 64;
  f.v_head_dim = 128;
  f.num_layers = 2;
  const std::string out = dir_.file("wide_heads");
  ASSERT_TRUE(flotilla::testing::WriteFamilyFolder(f, out).ok());
  EngineOptions opts;
  opts.backend = "cuda";
  opts.kv_memory_bytes = 8 << 20;
  auto e = Engine::Create(opts);
  ASSERT_TRUE(e.ok());
  const absl::Status s = (*e)->LoadHfModel("m", out, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(std::string(s.message()).find("config.json qk_nope_head_dim + qk_rope_head_dim = 320"), std::string::npos)
      << s;
}

// The fixtures' weights are drawn so that logits span tens of nats: bf16 rounding of weights
// and activations then moves logprobs by a small fraction of their size, so the check is
// relative (and on the argmax), as for the qwen3_moe bf16 fixture in gpu_hf_test.cc.
TEST_F(HfGpuFamilyTest, FamilyFixturesNearTransformers) {
  for (const std::string name : {"qwen3_a", "qwen3_yarn", "llama_a", "llama3_rope", "mixtral_a", "mixtral_b", "olmoe_a", "olmoe_b", "qwen2_moe_a",
                                 "qwen2_moe_sparse", "deepseek_v3_qlora", "deepseek_v3_yarn", "deepseek_v3_qlora_fp8",
                                 "deepseek_v3_bias", "deepseek_v3_wide"}) {
    const std::string dir = flotilla::testing::HfFixtureRoot() + "/" + name;
    const nlohmann::json golden = flotilla::testing::ReadJsonFile(dir + "/golden.json");
    ASSERT_TRUE(golden.is_object()) << dir;
    auto gpu = HfEngine("cuda", dir);
    ASSERT_TRUE(gpu) << name;
    for (const auto& seq : golden["sequences"]) {
      const std::vector<int32_t> ids = seq["ids"].get<std::vector<int32_t>>();
      const std::vector<double> want = seq["logprob"].get<std::vector<double>>();
      const std::vector<int32_t> top1 = seq["top1"].get<std::vector<int32_t>>();
      auto g = gpu->Score("m", ids, 0, 0, true);
      ASSERT_TRUE(g.ok()) << name << ": " << g.status();
      ASSERT_EQ(g->logprobs.size(), want.size());
      const size_t V = g->full_logprobs.size() / want.size();
      double sum_abs = 0, sum_diff = 0, max_diff = 0;
      size_t top1_same = 0;
      for (size_t t = 0; t < want.size(); ++t) {
        sum_abs += std::fabs(want[t]);
        sum_diff += std::fabs(g->logprobs[t] - want[t]);
        max_diff = std::max(max_diff, std::fabs(g->logprobs[t] - want[t]));
        const float* row = &g->full_logprobs[t * V];
        top1_same += std::max_element(row, row + V) - row == top1[t];
      }
      std::printf("hf_gpu_vs_transformers %s tokens=%zu mean_abs_logprob=%.3f mean_abs_diff=%.4f max_abs_diff=%.4f "
                  "relative=%.5f top1_same=%zu/%zu\n",
                  name.c_str(), ids.size(), sum_abs / want.size(), sum_diff / want.size(), max_diff, sum_diff / sum_abs,
                  top1_same, want.size());
      EXPECT_LT(sum_diff / sum_abs, 0.03) << name;
      EXPECT_GE(top1_same * 10, want.size() * 8) << name;
    }
  }
}

}  // namespace
}  // namespace flotilla::inference
