// Hugging Face folders (bf16) on the CUDA backend against the CPU backend (f32) on the same
// folder: full-vocabulary logprobs within bf16 tolerance over 64-token sequences for a random
// qwen3_moe with Qwen3's vocabulary (151,936) in both expert layouts, the sparse bf16 fixture
// (mlp_only_layers, norm_topk_prob false, tied embeddings) and a dense qwen3; routing capture,
// interrupt/resume and state save/load on the GPU. Skips without a CUDA device. The other
// families: gpu_hf_families_test.cc.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine_test_fixture.h"
#include "flotilla/inference/hf_init.h"
#include "gpu_hf_compare.h"
#include "hf_fixtures.h"

namespace flotilla::inference {
namespace {

using testing::Collected;

constexpr int64_t kQwen3Vocab = 151936;

HfInitOptions Qwen3MoeShape(const std::string& out, bool fused) {
  HfInitOptions o;
  o.family = "qwen3_moe";
  o.out_dir = out;
  o.vocab_size = kQwen3Vocab;
  o.hidden_size = 128;
  o.num_layers = 3;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.head_dim = 128;  // the attention kernels' vectorised paths
  o.num_experts = 8;
  o.top_k = 2;
  o.moe_intermediate_size = 64;
  o.seed = 11;
  o.dtype = DType::kBF16;
  o.fused_experts = fused;
  return o;
}

class HfGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveGpu()) return;
    dir_ = new flotilla::testing::TempDir();
    ASSERT_TRUE(WriteRandomHfModel(Qwen3MoeShape(dir_->file("per_expert"), false)).ok());
    ASSERT_TRUE(WriteRandomHfModel(Qwen3MoeShape(dir_->file("fused"), true)).ok());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  }
  static flotilla::testing::TempDir* dir_;
};
flotilla::testing::TempDir* HfGpuTest::dir_ = nullptr;

// Both expert layouts hold the same values: the CUDA engine scores them identically, and
// within bf16 tolerance of the CPU backend's f32.
TEST_F(HfGpuTest, Qwen3MoeBothExpertLayoutsMatchCpu) {
  auto cpu = HfEngine("cpu", dir_->file("per_expert"));
  auto gpu = HfEngine("cuda", dir_->file("per_expert"));
  auto fused = HfEngine("cuda", dir_->file("fused"));
  ASSERT_TRUE(cpu && gpu && fused);
  const std::vector<int32_t> ids = Ids(kQwen3Vocab);
  ExpectScoresAgree(*cpu, *gpu, ids, kQwen3Vocab, "qwen3_moe_per_expert");
  auto a = gpu->Score("m", ids, 0, 0, true);
  auto b = fused->Score("m", ids, 0, 0, true);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->full_logprobs, b->full_logprobs);
}

// mlp_only_layers [0] (a dense first layer), norm_topk_prob false (top-3 of 6), one KV head,
// tied embeddings, at the random init's scale: bf16 tolerance as above.
TEST_F(HfGpuTest, SparseQwen3MoeMatchesCpu) {
  HfInitOptions o = Qwen3MoeShape(dir_->file("sparse"), false);
  o.hidden_size = 64;
  o.num_heads = 4;
  o.num_kv_heads = 1;
  o.head_dim = 32;
  o.intermediate_size = 80;
  o.num_experts = 6;
  o.top_k = 3;
  o.moe_intermediate_size = 24;
  o.mlp_only_layers = {0};
  o.norm_topk_prob = false;
  o.tie_word_embeddings = true;
  ASSERT_TRUE(WriteRandomHfModel(o).ok());
  auto cpu = HfEngine("cpu", o.out_dir);
  auto gpu = HfEngine("cuda", o.out_dir);
  ASSERT_TRUE(cpu && gpu);
  ExpectScoresAgree(*cpu, *gpu, Ids(kQwen3Vocab), kQwen3Vocab, "qwen3_moe_sparse_random");
}

// The bf16 fixture transformers made (the same features, rope_theta 50000), whose weights are
// redrawn so that logits span tens of nats: bf16's relative rounding then moves logprobs by
// tenths in absolute terms, so the check is relative to the logprobs' size. Against
// transformers' own log-probs (f32 over the bf16-rounded weights, golden.json) and argmax, with
// the CPU backend's f32 as the control.
TEST_F(HfGpuTest, SparseBf16FixtureMatchesTransformers) {
  const std::string dir = flotilla::testing::HfFixtureRoot() + "/qwen3_moe_sparse_bf16";
  const nlohmann::json golden = flotilla::testing::ReadJsonFile(dir + "/golden.json");
  ASSERT_TRUE(golden.is_object()) << dir;
  auto cpu = HfEngine("cpu", dir);
  auto gpu = HfEngine("cuda", dir);
  ASSERT_TRUE(cpu && gpu);
  for (const auto& seq : golden["sequences"]) {
    const std::vector<int32_t> ids = seq["ids"].get<std::vector<int32_t>>();
    const std::vector<double> want = seq["logprob"].get<std::vector<double>>();
    const std::vector<int32_t> top1 = seq["top1"].get<std::vector<int32_t>>();
    auto c = cpu->Score("m", ids, 0, 0, true);
    auto g = gpu->Score("m", ids, 0, 0, true);
    ASSERT_TRUE(c.ok() && g.ok()) << g.status();
    ASSERT_EQ(g->logprobs.size(), want.size());
    double sum_abs = 0, sum_diff = 0, cpu_max = 0;
    size_t top1_same = 0;
    for (size_t t = 0; t < want.size(); ++t) {
      sum_abs += std::fabs(want[t]);
      sum_diff += std::fabs(g->logprobs[t] - want[t]);
      cpu_max = std::max(cpu_max, std::fabs(c->logprobs[t] - want[t]));
      const float* row = &g->full_logprobs[t * 512];
      top1_same += std::max_element(row, row + 512) - row == top1[t];
    }
    std::printf("hf_gpu_vs_transformers qwen3_moe_sparse_bf16 tokens=%zu mean_abs_logprob=%.3f mean_abs_diff=%.4f "
                "relative=%.5f top1_same=%zu/%zu cpu_max_abs_diff=%.6f\n",
                ids.size(), sum_abs / want.size(), sum_diff / want.size(), sum_diff / sum_abs, top1_same, want.size(),
                cpu_max);
    EXPECT_LT(cpu_max, 1e-3);
    EXPECT_LT(sum_diff / sum_abs, 0.01);
    EXPECT_GE(top1_same * 10, want.size() * 9);
  }
}

TEST_F(HfGpuTest, DenseQwen3MatchesCpu) {
  HfInitOptions o;
  o.family = "qwen3";
  o.out_dir = dir_->file("dense");
  o.vocab_size = 4096;
  o.hidden_size = 128;
  o.num_layers = 2;
  o.num_heads = 4;
  o.num_kv_heads = 1;
  o.head_dim = 32;
  o.intermediate_size = 192;
  o.seed = 5;
  ASSERT_TRUE(WriteRandomHfModel(o).ok());
  auto cpu = HfEngine("cpu", o.out_dir);
  auto gpu = HfEngine("cuda", o.out_dir);
  ASSERT_TRUE(cpu && gpu);
  ExpectScoresAgree(*cpu, *gpu, Ids(4096), 4096, "qwen3_dense");
  GenerateRequest req;
  req.prompt = Ids(4096, 8);
  req.sampling.temperature = 0;
  req.sampling.max_new_tokens = 4;
  req.sampling.stop_tokens = {-1};
  auto g = gpu->GenerateBlocking(req);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->tokens.size(), 4u);
  for (const TokenRecord& t : g->tokens) EXPECT_TRUE(t.experts.empty());  // no MoE layer
}

// Each token's record carries its experts in the 3 MoE layers (top-2), the CPU backend's choice
// for the same inputs; an interrupted sequence saved, loaded and resumed on
// the GPU continues with exactly the tokens and routing of the uninterrupted run.
TEST_F(HfGpuTest, RoutingCaptureAndResumeOnGpu) {
  auto cpu = HfEngine("cpu", dir_->file("per_expert"));
  auto gpu = HfEngine("cuda", dir_->file("per_expert"));
  ASSERT_TRUE(cpu && gpu);
  GenerateRequest req;
  req.prompt = Ids(kQwen3Vocab, 20);
  req.sampling.temperature = 0;
  req.sampling.max_new_tokens = 16;
  req.sampling.stop_tokens = {-1};
  auto c = cpu->GenerateBlocking(req);
  auto g = gpu->GenerateBlocking(req);
  ASSERT_TRUE(c.ok() && g.ok()) << g.status();
  ASSERT_EQ(g->tokens.size(), 16u);
  for (const TokenRecord& t : g->tokens) {
    ASSERT_EQ(t.experts.size(), 3u * 2u);
    for (int32_t e : t.experts) EXPECT_TRUE(e >= 0 && e < 8) << e;
  }
  // A record's experts are the routing of the row its token was drawn from: the two engines
  // routed the same inputs up to and including the first record whose token differs (near-ties
  // of 151,936 near-uniform logits can part bf16 from f32 early).
  size_t compared = 0, experts_same = 0, experts_total = 0;
  for (size_t i = 0; i < 16; ++i) {
    for (size_t k = 0; k < 6; ++k) {
      experts_same += c->tokens[i].experts[k] == g->tokens[i].experts[k];
      ++experts_total;
    }
    ++compared;
    if (c->tokens[i].token != g->tokens[i].token) break;
  }
  std::printf("hf_gpu_vs_cpu greedy_records_compared=%zu/16 expert_agreement=%zu/%zu\n", compared, experts_same,
              experts_total);
  EXPECT_GE(experts_same * 10, experts_total * 8);

  req.sampling.temperature = 0.8f;
  req.sampling.seed = 3;
  req.keep_state = true;
  auto full = gpu->GenerateBlocking(req);
  ASSERT_TRUE(full.ok());
  req.sampling.max_new_tokens = 6;
  auto part = gpu->GenerateBlocking(req);
  ASSERT_TRUE(part.ok());
  auto handle = gpu->SaveState(part->sequence_id, true, 0);
  ASSERT_TRUE(handle.ok()) << handle.status();
  auto id = gpu->LoadState(*handle);
  ASSERT_TRUE(id.ok()) << id.status();
  const uint64_t prefill = gpu->Stats().prefill_tokens;
  Collected rest;
  req.sampling.max_new_tokens = 10;
  ASSERT_TRUE(gpu->Resume(*id, req.sampling, rest.Sink()).ok());
  rest.done.WaitForNotification();
  EXPECT_EQ(gpu->Stats().prefill_tokens, prefill);
  ASSERT_EQ(rest.tokens.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(rest.tokens[i].token, full->tokens[6 + i].token) << i;
    EXPECT_EQ(rest.tokens[i].experts, full->tokens[6 + i].experts) << i;
  }
}

}  // namespace
}  // namespace flotilla::inference
