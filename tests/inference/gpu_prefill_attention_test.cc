// The prefill attention kernel (cuda/gqa_prefill_flash.cu) against a float reference on the
// host over the same paged K/V: a run of rows of one sequence at positions [prefix, prefix + n)
// (the K/V of the earlier positions already in the pages, as for a later chunk of a prefill),
// between single decode rows of three other sequences (runs of one row mixed into its blocks).
// Run lengths on and off the 64-key tile and the block's 256 / G rows, a run from key 0 (the
// first chunk), query groups of 8, 4, 2, 1 and 16 heads per KV head, and a 64-token window.
// The output is poisoned (NaN) before the launch, so every row must be written.
// Skips without a CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/ops.cuh"
#include "gtest/gtest.h"

namespace flotilla::inference::cuda {
namespace {

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

uint16_t Bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float F32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T>
T* Upload(const std::vector<T>& v) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, v.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

struct Case {
  int n_heads, n_kv_heads, prefix, n, window;
};

class GpuPrefillAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuPrefillAttentionTest, MatchesHostReference) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const Case c = GetParam();
  constexpr int kHd = 128, kPageTokens = 16, kLayers = 2, kLayer = 1, kSeqs = 4;
  const int max_pos = std::max(c.prefix + c.n, 701);
  const int kvd = c.n_kv_heads * kHd, pages_per_seq = max_pos / kPageTokens + 1;
  const size_t page_elems = static_cast<size_t>(kLayers) * 2 * kPageTokens * kvd;
  std::mt19937 rng(17 + c.n_heads * 131 + c.prefix * 7 + c.n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Pages filled with random K/V; sequence s owns pages in a strided order (tables not identity).
  const int n_pages = kSeqs * pages_per_seq;
  std::vector<uint16_t> pages(page_elems * n_pages);
  for (uint16_t& v : pages) v = Bf16(normal(rng));
  std::vector<int32_t> table(static_cast<size_t>(kSeqs) * pages_per_seq);
  for (int s = 0; s < kSeqs; ++s) {
    for (int p = 0; p < pages_per_seq; ++p) table[s * pages_per_seq + p] = (p * kSeqs + s * 7) % n_pages;
  }
  std::vector<int32_t> positions, row_seq;
  auto add = [&](int seq, int pos) {
    row_seq.push_back(seq);
    positions.push_back(pos);
  };
  add(1, 700);
  add(2, 33);
  for (int p = c.prefix; p < c.prefix + c.n; ++p) add(0, p);
  add(3, 0);
  const int rows = static_cast<int>(positions.size());
  std::vector<uint16_t> q(static_cast<size_t>(rows) * c.n_heads * kHd);
  for (uint16_t& v : q) v = Bf16(normal(rng) * 2.0f);  // sharper softmax than unit scores

  uint16_t* d_pages = Upload(pages);
  int32_t* d_table = Upload(table);
  int32_t* d_pos = Upload(positions);
  int32_t* d_seq = Upload(row_seq);
  uint16_t* d_q = Upload(q);
  uint16_t* d_out = Upload(std::vector<uint16_t>(q.size(), 0x7FC0));  // NaN
  KvGeometry kv{d_pages, d_table, pages_per_seq, kPageTokens, kLayers, kvd};
  ASSERT_EQ(LaunchGqaPrefill(d_q, d_pos, d_seq, kv, kLayer, rows, c.n_heads, c.n_kv_heads, c.window, d_out, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> out(q.size());
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, out.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* p : {static_cast<void*>(d_pages), static_cast<void*>(d_table), static_cast<void*>(d_pos),
                  static_cast<void*>(d_seq), static_cast<void*>(d_q), static_cast<void*>(d_out)}) {
    cudaFree(p);
  }

  // The reference: softmax(q k / sqrt(d)) v over keys [window start, position], in double.
  const int group = c.n_heads / c.n_kv_heads;
  auto kv_at = [&](int seq, int pos, int kvh, int which, int d) {
    const size_t page = table[seq * pages_per_seq + pos / kPageTokens];
    return F32(pages[page * page_elems + (static_cast<size_t>(kLayer) * 2 + which) * kPageTokens * kvd +
                     static_cast<size_t>(pos % kPageTokens) * kvd + kvh * kHd + d]);
  };
  double max_diff = 0, err2 = 0, ref2 = 0;
  std::vector<double> score, acc(kHd);
  for (int r = 0; r < rows; ++r) {
    const int pos = positions[r], lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
    for (int h = 0; h < c.n_heads; ++h) {
      const uint16_t* qr = &q[(static_cast<size_t>(r) * c.n_heads + h) * kHd];
      score.assign(pos - lo + 1, 0.0);
      double m = -1e300;
      for (int j = lo; j <= pos; ++j) {
        double dot = 0;
        for (int d = 0; d < kHd; ++d) dot += static_cast<double>(F32(qr[d])) * kv_at(row_seq[r], j, h / group, 0, d);
        score[j - lo] = dot / std::sqrt(static_cast<double>(kHd));
        m = std::max(m, score[j - lo]);
      }
      double l = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int j = lo; j <= pos; ++j) {
        const double p = std::exp(score[j - lo] - m);
        l += p;
        for (int d = 0; d < kHd; ++d) acc[d] += p * kv_at(row_seq[r], j, h / group, 1, d);
      }
      for (int d = 0; d < kHd; ++d) {
        const double ref = acc[d] / l, got = F32(out[(static_cast<size_t>(r) * c.n_heads + h) * kHd + d]);
        ASSERT_TRUE(std::isfinite(got)) << "row " << r << " head " << h << " dim " << d;
        max_diff = std::max(max_diff, std::fabs(ref - got));
        err2 += (ref - got) * (ref - got);
        ref2 += ref * ref;
      }
    }
  }
  const double rel = std::sqrt(err2 / ref2);
  std::printf("gpu_prefill_attention heads=%d kv_heads=%d prefix=%d n=%d window=%d max_abs_diff=%.5f rel_l2=%.2e\n",
              c.n_heads, c.n_kv_heads, c.prefix, c.n, c.window, max_diff, rel);
  EXPECT_GT(ref2, 0.0);
  EXPECT_LT(max_diff, 0.02);
  EXPECT_LT(rel, 1e-2);
}

std::vector<Case> Cases() {
  return {
      // Qwen3-30B-A3B's 32 / 4: a later chunk off the tile (prefix 333, 150 rows), a first chunk
      // (from key 0) of exactly one tile and one past it, a single row, and a 64-token window.
      {32, 4, 333, 150, 0},
      {32, 4, 0, 64, 0},
      {32, 4, 0, 65, 0},
      {32, 4, 500, 1, 0},
      {32, 4, 200, 301, 64},
      // 16 / 16 (G = 1): 128 rows a block, a run over three blocks.
      {16, 16, 100, 300, 0},
      {16, 16, 0, 129, 0},
      // 8 / 2 (G = 4), 8 / 4 (G = 2), 16 / 1 (G = 16).
      {8, 2, 257, 97, 0},
      {8, 4, 63, 200, 0},
      {16, 1, 31, 77, 0},
      {16, 1, 0, 40, 16},
  };
}

INSTANTIATE_TEST_SUITE_P(GroupsAndLengths, GpuPrefillAttentionTest, ::testing::ValuesIn(Cases()));

}  // namespace
}  // namespace flotilla::inference::cuda
