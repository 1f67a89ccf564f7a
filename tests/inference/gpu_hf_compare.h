// What the gpu tests of Hugging Face folders share: whether a CUDA device is there, an engine
// of one backend over a folder, spread token ids, and the comparison of two engines' full-
// vocabulary logprobs within bf16 tolerance (printing the differences).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine_test_fixture.h"

namespace flotilla::inference {

inline bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

inline std::unique_ptr<Engine> HfEngine(const char* backend, const std::string& dir) {
  EngineOptions opts;
  opts.backend = backend;
  opts.threads = 2;
  opts.kv_memory_bytes = 64 << 20;
  auto e = Engine::Create(opts);
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return nullptr;
  const absl::Status s = (*e)->LoadHfModel("m", dir, 1);
  EXPECT_TRUE(s.ok()) << backend << ": " << s;
  return s.ok() ? std::move(*e) : nullptr;
}

// n ids spread over the vocabulary.
inline std::vector<int32_t> Ids(int64_t vocab, int n = 64) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((static_cast<int64_t>(i) * 2654435761LL + 17) % vocab));
  return ids;
}

// Full-vocabulary logprobs of `ids` on both engines within bf16 tolerance. bf16 rounding can
// flip a near-tied router choice at a position, which legitimately moves that position's
// distribution; every other position stays close. Returns the largest difference.
inline double ExpectScoresAgree(Engine& cpu, Engine& gpu, const std::vector<int32_t>& ids, size_t vocab,
                                const char* what) {
  auto c = cpu.Score("m", ids, 0, 0, true);
  auto g = gpu.Score("m", ids, 0, 0, true);
  EXPECT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(g.ok()) << g.status();
  if (!c.ok() || !g.ok()) return INFINITY;
  EXPECT_EQ(c->full_logprobs.size(), g->full_logprobs.size());
  const size_t V = vocab, n = c->logprobs.size();
  EXPECT_EQ(n + 1, ids.size());
  EXPECT_EQ(c->full_logprobs.size(), n * V);
  if (g->full_logprobs.size() != n * V || c->full_logprobs.size() != n * V) return INFINITY;
  double max_diff = 0, sum_diff = 0;
  size_t far_positions = 0, non_finite = 0;
  for (size_t p = 0; p < n; ++p) {
    double pos_max = 0;
    for (size_t v = 0; v < V; ++v) {
      non_finite += !std::isfinite(g->full_logprobs[p * V + v]);
      const double d = std::fabs(c->full_logprobs[p * V + v] - g->full_logprobs[p * V + v]);
      pos_max = std::max(pos_max, d);
      sum_diff += d;
    }
    max_diff = std::max(max_diff, pos_max);
    far_positions += pos_max > 0.15;
  }
  const double mean_diff = sum_diff / static_cast<double>(n * V);
  std::printf("hf_gpu_vs_cpu %s tokens=%zu vocab=%zu max_abs_logprob_diff=%.5f mean_abs_logprob_diff=%.6f "
              "positions_over_0.15=%zu/%zu\n",
              what, ids.size(), V, max_diff, mean_diff, far_positions, n);
  EXPECT_EQ(non_finite, 0u);
  EXPECT_LT(mean_diff, 0.02);
  EXPECT_LE(far_positions * 10, n);
  return max_diff;
}

}  // namespace flotilla::inference
