// Routing replay on the CUDA backend for every MoE family (a small random bf16 folder of each,
// hf_family_folder.h): the step forced onto the experts a free pass captured reproduces that
// pass's log-probs; forced onto other experts it returns exactly those, moves the log-probs, and
// agrees with the CPU backend (f32, hf_model.h) replaying the same experts within bf16
// tolerance, as the captured route does. Replays of the wrong size or with an expert outside the
// model are refused. And the same on Flotilla's own format (every layer MoE, renormalised top-k),
// with one set of random weights on both backends. Skips without a CUDA device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/hf_model.h"
#include "gpu_hf_compare.h"
#include "hf_checkpoint.h"
#include "hf_family_folder.h"
#include "inference/test_model.h"
#include "thread_pool.h"
#include "weights.h"

namespace flotilla::inference {
namespace {

struct Scored {
  std::vector<float> logprob;  // log p(ids[t+1] | ids[..t])
  std::vector<int32_t> experts;
};

// One prefill step of `ids` on `backend`, teacher-forced log-probs from its logits.
absl::StatusOr<Scored> Step(ModelBackend& backend, const std::vector<int32_t>& ids, const std::vector<int32_t>& replay,
                            int vocab) {
  const int n = static_cast<int>(ids.size());
  StepInput in;
  in.tokens = ids;
  in.positions.resize(n);
  std::iota(in.positions.begin(), in.positions.end(), 0);
  in.row_seq.assign(n, 0);
  in.seq_pages.emplace_back((n + 15) / 16);
  std::iota(in.seq_pages[0].begin(), in.seq_pages[0].end(), 0);
  in.logit_rows.resize(n - 1);
  std::iota(in.logit_rows.begin(), in.logit_rows.end(), 0);
  in.replay_experts = replay;
  StepOutput out;
  RETURN_IF_ERROR(backend.Forward(in, &out));
  Scored s;
  s.experts = std::move(out.experts);
  for (int t = 0; t + 1 < n; ++t) {
    const float* lg = &out.logits[static_cast<size_t>(t) * vocab];
    const float mx = *std::max_element(lg, lg + vocab);
    double sum = 0;
    for (int v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(lg[v]) - mx);
    s.logprob.push_back(static_cast<float>(lg[ids[t + 1]] - mx - std::log(sum)));
  }
  return s;
}

// Mean and largest absolute difference of two log-prob lists.
std::pair<double, double> Diff(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0, mx = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    sum += d;
    mx = std::max(mx, d);
  }
  return {sum / static_cast<double>(a.size()), mx};
}

class HfGpuReplayTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  }
  flotilla::testing::TempDir dir_;
};

TEST_P(HfGpuReplayTest, ReplayedRoutesMatchTheCapturedPassAndTheCpu) {
  const std::string family = GetParam();
  HfInitOptions o = flotilla::testing::FamilyOptions(family, 31);
  if (family == "deepseek_v3") {
    o.num_experts = 16;
    o.top_k = 3;
    o.norm_topk_prob = true;
  }
  if (family == "qwen2_moe") o.mlp_only_layers = {1};
  if (family == "qwen3_moe") o.norm_topk_prob = true;
  const std::string out = dir_.file(family);
  const absl::Status written = flotilla::testing::WriteFamilyFolder(o, out);
  ASSERT_TRUE(written.ok()) << written;
  auto config = HfConfig::FromDir(out);
  ASSERT_TRUE(config.ok()) << config.status();
  auto ckpt = HfCheckpoint::Open(out);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto gpu = CreateHfCudaBackend(*config, ckpt->get(), 16, 32 << 20);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = HfModel::Load(out);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const int V = config->vocab_size, E = config->num_experts;
  const std::vector<int32_t> ids = Ids(V, 48);

  auto free_run = Step(**gpu, ids, {}, V);
  ASSERT_TRUE(free_run.ok()) << free_run.status();
  const size_t per_run = ids.size() * config->num_moe_layers() * config->top_k;
  ASSERT_EQ(free_run->experts.size(), per_run);
  auto same = Step(**gpu, ids, free_run->experts, V);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->experts, free_run->experts);
  const auto [same_mean, same_max] = Diff(same->logprob, free_run->logprob);

  // Every choice moved to the next expert id (a bijection: still distinct within a token).
  std::vector<int32_t> other = free_run->experts;
  for (int32_t& e : other) e = (e + 1) % E;
  auto forced = Step(**gpu, ids, other, V);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(forced->experts, other);
  const auto [moved_mean, moved_max] = Diff(forced->logprob, free_run->logprob);

  auto cpu_same = (*cpu)->Score(ids, free_run->experts, 2);
  auto cpu_forced = (*cpu)->Score(ids, other, 2);
  ASSERT_TRUE(cpu_same.ok() && cpu_forced.ok());
  EXPECT_EQ(cpu_forced->experts, other);
  const auto [cpu_same_mean, cpu_same_max] = Diff(cpu_same->logprob, free_run->logprob);
  const auto [cpu_forced_mean, cpu_forced_max] = Diff(cpu_forced->logprob, forced->logprob);
  std::printf("hf_gpu_replay %s tokens=%zu replay_captured mean=%.6f max=%.6f | other_route moved mean=%.4f max=%.4f | "
              "gpu_vs_cpu captured mean=%.5f max=%.5f other mean=%.5f max=%.5f\n",
              family.c_str(), ids.size(), same_mean, same_max, moved_mean, moved_max, cpu_same_mean, cpu_same_max,
              cpu_forced_mean, cpu_forced_max);
  // The captured route replayed: the same experts and weights (the replay kernel recomputes the
  // router's weights; only float rounding of those may differ from the fused routing's).
  EXPECT_LT(same_max, 2e-3) << family;
  // Another route moves the log-probs far beyond that, and the CPU, given the same route, agrees
  // within bf16 tolerance, as it does on the captured route.
  EXPECT_GT(moved_mean, 0.05) << family;
  EXPECT_LT(cpu_same_mean, 0.02) << family;
  EXPECT_LT(cpu_same_max, 0.15) << family;
  EXPECT_LT(cpu_forced_mean, 0.02) << family;
  EXPECT_LT(cpu_forced_max, 0.15) << family;

  std::vector<int32_t> bad = free_run->experts;
  bad[3] = E;
  const auto refused = Step(**gpu, ids, bad, V);
  EXPECT_EQ(refused.status().message(), absl::StrCat("replayed expert ", E, " outside [0, ", E, ")"));
  bad.pop_back();
  EXPECT_EQ(Step(**gpu, ids, bad, V).status().code(), absl::StatusCode::kInvalidArgument);
}

// The mean absolute difference of two steps' log-softmax rows (full vocabulary).
double LogSoftmaxDiff(const std::vector<float>& a, const std::vector<float>& b, int vocab) {
  double sum = 0;
  for (size_t r = 0; r * vocab < a.size(); ++r) {
    double za = 0, zb = 0;
    const float *ra = &a[r * vocab], *rb = &b[r * vocab];
    const float ma = *std::max_element(ra, ra + vocab), mb = *std::max_element(rb, rb + vocab);
    for (int v = 0; v < vocab; ++v) {
      za += std::exp(static_cast<double>(ra[v]) - ma);
      zb += std::exp(static_cast<double>(rb[v]) - mb);
    }
    const double la = ma + std::log(za), lb = mb + std::log(zb);
    for (int v = 0; v < vocab; ++v) sum += std::fabs((ra[v] - la) - (rb[v] - lb));
  }
  return sum / static_cast<double>(a.size());
}

TEST(GpuReplay, FlotillaFormatForcedExpertsAreUsed) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig c = testing::TinyConfig();
  const std::shared_ptr<const ModelWeights> w = ModelWeights::Random(c, 7, 0.2f, 0);
  ThreadPool pool(1);
  auto cpu = CreateCpuBackend(c, 16, 4 << 20, &pool);
  auto gpu = CreateCudaBackend(c, 16, 8 << 20);
  ASSERT_TRUE(cpu.ok() && gpu.ok()) << gpu.status();
  ASSERT_TRUE((*cpu)->SetWeights(w).ok());
  ASSERT_TRUE((*gpu)->SetWeights(w).ok());
  StepInput in;
  for (int t = 0; t < 12; ++t) {
    in.tokens.push_back((t * 29 + 3) % c.vocab_size);
    in.positions.push_back(t);
    in.row_seq.push_back(0);
    in.logit_rows.push_back(t);
  }
  in.seq_pages = {{0}};
  StepOutput free_run, same, forced, cpu_forced;
  ASSERT_TRUE((*gpu)->Forward(in, &free_run).ok());
  in.replay_experts = free_run.experts;
  ASSERT_TRUE((*gpu)->Forward(in, &same).ok());
  EXPECT_EQ(same.experts, free_run.experts);
  const double same_diff = LogSoftmaxDiff(same.logits, free_run.logits, c.vocab_size);
  for (int32_t& e : in.replay_experts) e = (e + 1) % c.n_experts;
  ASSERT_TRUE((*gpu)->Forward(in, &forced).ok());
  ASSERT_TRUE((*cpu)->Forward(in, &cpu_forced).ok());
  EXPECT_EQ(forced.experts, in.replay_experts);
  EXPECT_EQ(cpu_forced.experts, in.replay_experts);
  const double moved = LogSoftmaxDiff(forced.logits, free_run.logits, c.vocab_size);
  const double vs_cpu = LogSoftmaxDiff(forced.logits, cpu_forced.logits, c.vocab_size);
  std::printf("gpu_replay flotilla_format replay_captured=%.6f other_route_moved=%.4f gpu_vs_cpu_other_route=%.5f\n",
              same_diff, moved, vs_cpu);
  EXPECT_LT(same_diff, 1e-3);
  EXPECT_GT(moved, 10 * vs_cpu);
  EXPECT_LT(vs_cpu, 0.05);  // 0.0197 on the H200 (bf16 weights and activations against f32)
  in.replay_experts[0] = c.n_experts;
  EXPECT_FALSE((*gpu)->Forward(in, &forced).ok());
  in.replay_experts.pop_back();
  EXPECT_FALSE((*gpu)->Forward(in, &forced).ok());
}

INSTANTIATE_TEST_SUITE_P(MoeFamilies, HfGpuReplayTest,
                         ::testing::Values("qwen3_moe", "mixtral", "olmoe", "qwen2_moe", "deepseek_v3"));

}  // namespace
}  // namespace flotilla::inference
