// Device sampling over Qwen3's full vocabulary (151,936) on the CUDA backend: the draws, logprobs
// and top lists against the host's SampleToken on the same logits, and the drawn tokens'
// distribution against the softmax they come from. Skips without a CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "flotilla/inference/hf_config.h"
#include "gtest/gtest.h"
#include "sampler.h"

namespace flotilla::inference {
namespace {

constexpr int kVocab = 151936;

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// A small qwen3_moe with Qwen3's vocabulary, random weights made on the device; stddev 0.25
// spreads the logits over several nats, so the draws are neither uniform nor one argmax.
std::unique_ptr<ModelBackend> WideVocabBackend() {
  auto config = HfConfig::FromJson(
      R"({"model_type":"qwen3_moe","vocab_size":151936,"hidden_size":128,"num_hidden_layers":2,)"
      R"("num_attention_heads":4,"num_key_value_heads":2,"head_dim":128,"intermediate_size":256,)"
      R"("moe_intermediate_size":64,"num_experts":8,"num_experts_per_tok":2,"norm_topk_prob":true,)"
      R"("decoder_sparse_step":1,"mlp_only_layers":[],"rms_norm_eps":1e-6,"max_position_embeddings":4096,)"
      R"("rope_theta":1000000.0,"tie_word_embeddings":false,"attention_bias":false})",
      "test config");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  auto b = CreateHfCudaBackend(*config, nullptr, 16, 64 << 20);
  EXPECT_TRUE(b.ok()) << b.status();
  if (!b.ok()) return nullptr;
  EXPECT_TRUE((*b)->SetRandomWeights(5, 0.25f).ok());
  return std::move(*b);
}

// One 24-token sequence; `logit_rows` as given.
StepInput Prompt(std::vector<int32_t> logit_rows) {
  StepInput in;
  in.seq_pages.push_back({0, 1});
  for (int i = 0; i < 24; ++i) {
    in.tokens.push_back(static_cast<int32_t>((static_cast<int64_t>(i) * 2654435761LL + 17) % kVocab));
    in.positions.push_back(i);
    in.row_seq.push_back(0);
  }
  in.logit_rows = std::move(logit_rows);
  return in;
}

TEST(GpuWideSamplingTest, DrawsMatchHostSamplerOverFullVocabulary) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<ModelBackend> backend = WideVocabBackend();
  ASSERT_NE(backend, nullptr);
  ASSERT_TRUE(backend->SamplesOnDevice());
  std::vector<int32_t> rows;
  for (int i = 0; i < 24; ++i) rows.push_back(i);
  StepInput in = Prompt(rows);
  StepOutput logits;
  ASSERT_TRUE(backend->Forward(in, &logits).ok());
  const size_t R = rows.size(), V = kVocab;
  ASSERT_EQ(logits.logits.size(), R * V);
  // Greedy and three temperatures; no top list, short ones, and one past what the device's
  // threads keep (40 > 32: its further entries take their own passes).
  const float temperatures[] = {0.0f, 0.5f, 1.0f, 1.7f};
  const uint32_t tops[] = {0, 5, 20, 40};
  size_t checked = 0, distinct = 0;
  for (int round = 0; round < 4; ++round) {
    std::vector<SamplingParams> params(R);
    std::vector<SequenceRng> rngs;
    in.sampling.assign(R, RowSampling{});
    for (size_t r = 0; r < R; ++r) {
      params[r].temperature = temperatures[(r + round) % 4];
      params[r].top_logprobs = tops[(r / 4 + round) % 4];
      rngs.emplace_back(7000 * round + r);
      in.sampling[r] = {params[r].temperature, params[r].top_logprobs, rngs[r].state()};
    }
    StepOutput drawn;
    ASSERT_TRUE(backend->Forward(in, &drawn).ok());
    ASSERT_TRUE(drawn.logits.empty());
    ASSERT_EQ(drawn.sampled.size(), R);
    std::vector<int32_t> tokens;
    for (size_t r = 0; r < R; ++r) {
      TokenRecord host;
      SampleToken(&logits.logits[r * V], kVocab, params[r], &rngs[r], &host);
      const SampledRow& dev = drawn.sampled[r];
      EXPECT_EQ(dev.token, host.token) << "round " << round << " row " << r;
      EXPECT_EQ(dev.logprob, host.logprob) << "round " << round << " row " << r;
      EXPECT_EQ(dev.top_ids, host.top_ids) << "round " << round << " row " << r;
      EXPECT_EQ(dev.top_logprobs, host.top_logprobs) << "round " << round << " row " << r;
      tokens.push_back(host.token);
      ++checked;
    }
    std::sort(tokens.begin(), tokens.end());
    distinct += static_cast<size_t>(std::unique(tokens.begin(), tokens.end()) - tokens.begin());
  }
  std::printf("gpu_wide_sampling rows=%zu distinct_tokens_per_round_sum=%zu\n", checked, distinct);
  EXPECT_GT(distinct, checked / 3);  // many different draws, not one argmax repeated
}

// 4,096 draws at temperature 1 from one logit row (the row repeated, each with its own RNG
// state): the mean logprob of the drawn tokens estimates minus the row's entropy, and the most
// likely token's share its probability; both within 5 standard errors.
TEST(GpuWideSamplingTest, DrawsFollowTheSoftmax) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<ModelBackend> backend = WideVocabBackend();
  ASSERT_NE(backend, nullptr);
  StepInput in = Prompt({23});
  StepOutput logits;
  ASSERT_TRUE(backend->Forward(in, &logits).ok());
  ASSERT_EQ(logits.logits.size(), static_cast<size_t>(kVocab));
  std::vector<float> lp;
  LogSoftmax(logits.logits.data(), kVocab, &lp);
  double entropy = 0, second = 0;
  for (float v : lp) {
    const double p = std::exp(static_cast<double>(v));
    entropy -= p * v;
    second += p * v * v;
  }
  const int32_t top = static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
  const double p_top = std::exp(static_cast<double>(lp[static_cast<size_t>(top)]));
  constexpr int kDraws = 4096;
  in.logit_rows.assign(kDraws, 23);
  in.sampling.assign(kDraws, RowSampling{});
  for (int i = 0; i < kDraws; ++i) in.sampling[i] = {1.0f, 0, SequenceRng(100 + i).state()};
  StepOutput drawn;
  ASSERT_TRUE(backend->Forward(in, &drawn).ok());
  ASSERT_EQ(drawn.sampled.size(), static_cast<size_t>(kDraws));
  double mean_lp = 0;
  int top_hits = 0;
  for (const SampledRow& s : drawn.sampled) {
    ASSERT_GE(s.token, 0);
    ASSERT_LT(s.token, kVocab);
    EXPECT_EQ(s.logprob, lp[static_cast<size_t>(s.token)]);
    mean_lp += s.logprob;
    top_hits += s.token == top;
  }
  mean_lp /= kDraws;
  const double se_lp = std::sqrt((second - entropy * entropy) / kDraws);
  const double share = static_cast<double>(top_hits) / kDraws, se_share = std::sqrt(p_top * (1 - p_top) / kDraws);
  std::printf("gpu_wide_sampling entropy=%.4f mean_drawn_logprob=%.4f se=%.4f p_top=%.4f top_share=%.4f se=%.4f\n",
              entropy, mean_lp, se_lp, p_top, share, se_share);
  EXPECT_GT(entropy, 1.0);  // a spread distribution: the test is not of one token
  EXPECT_LT(p_top, 0.9);
  EXPECT_NEAR(mean_lp, -entropy, 5 * se_lp);
  EXPECT_NEAR(share, p_top, 5 * se_share + 1e-9);
}

}  // namespace
}  // namespace flotilla::inference
