// The prefill attention kernel (cuda/gqa_prefill_mma.cu) against the per-row grouped kernel on
// the same paged K/V and queries: a 150-row prefill run of one sequence at positions 850..999
// beside single decode rows of four other sequences (runs of one row mixed into its blocks),
// query groups of 8, 4 and 2 heads per KV head, full attention and a 64-token window, each
// block shape (warps x m16 fragments per warp). Both accumulate in f32 and round P and O to
// bf16, so they agree within bf16 rounding.
// Skips without a CUDA device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
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
  int n_heads, n_kv_heads, window, warps, frags;
};

class GpuPrefillAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuPrefillAttentionTest, MatchesPerRowKernel) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const Case c = GetParam();
  constexpr int kHd = 128, kPageTokens = 16, kLayers = 2, kLayer = 1, kSeqs = 5, kMaxPos = 1000;
  const int kvd = c.n_kv_heads * kHd, pages_per_seq = kMaxPos / kPageTokens + 1;
  const size_t page_elems = static_cast<size_t>(kLayers) * 2 * kPageTokens * kvd;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Pages filled with random K/V; sequence s owns pages in a strided order (tables not identity).
  const int n_pages = kSeqs * pages_per_seq;
  std::vector<uint16_t> pages(page_elems * n_pages);
  for (uint16_t& v : pages) v = Bf16(normal(rng));
  std::vector<int32_t> table(static_cast<size_t>(kSeqs) * pages_per_seq);
  for (int s = 0; s < kSeqs; ++s) {
    for (int p = 0; p < pages_per_seq; ++p) table[s * pages_per_seq + p] = (p * kSeqs + s * 7) % n_pages;
  }
  // Rows: two decode rows, the 150-row run of sequence 0, two more decode rows.
  std::vector<int32_t> positions, row_seq;
  auto add = [&](int seq, int pos) {
    row_seq.push_back(seq);
    positions.push_back(pos);
  };
  add(1, 700);
  add(2, 33);
  for (int p = 850; p < kMaxPos; ++p) add(0, p);
  add(3, 999);
  add(4, 5);
  const int rows = static_cast<int>(positions.size());
  std::vector<uint16_t> q(static_cast<size_t>(rows) * c.n_heads * kHd);
  for (uint16_t& v : q) v = Bf16(normal(rng));

  uint16_t* d_pages = Upload(pages);
  int32_t* d_table = Upload(table);
  int32_t* d_pos = Upload(positions);
  int32_t* d_seq = Upload(row_seq);
  uint16_t* d_q = Upload(q);
  const std::vector<uint16_t> zeros(q.size(), 0);
  uint16_t* d_ref = Upload(zeros);
  uint16_t* d_out = Upload(zeros);
  KvGeometry kv{d_pages, d_table, pages_per_seq, kPageTokens, kLayers, kvd};
  ASSERT_EQ(LaunchGqaAttentionMma(d_q, d_pos, d_seq, kv, kLayer, rows, c.n_heads, c.n_kv_heads, c.window, d_ref, nullptr),
            cudaSuccess);
  ASSERT_EQ(LaunchGqaPrefill(d_q, d_pos, d_seq, kv, kLayer, rows, c.n_heads, c.n_kv_heads, c.window, d_out, nullptr,
                             c.warps, c.frags),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> ref(q.size()), out(q.size());
  ASSERT_EQ(cudaMemcpy(ref.data(), d_ref, ref.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, out.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* p : {static_cast<void*>(d_pages), static_cast<void*>(d_table), static_cast<void*>(d_pos),
                  static_cast<void*>(d_seq), static_cast<void*>(d_q), static_cast<void*>(d_ref), static_cast<void*>(d_out)}) {
    cudaFree(p);
  }
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double a = F32(ref[i]), b = F32(out[i]);
    ASSERT_TRUE(std::isfinite(b)) << i;
    max_diff = std::max(max_diff, std::fabs(a - b));
    max_ref = std::max(max_ref, std::fabs(a));
  }
  std::printf("gpu_prefill_attention heads=%d kv_heads=%d window=%d shape=%dx%d rows=%d max_abs_diff=%.5f "
              "max_abs_out=%.4f\n",
              c.n_heads, c.n_kv_heads, c.window, c.warps, c.frags, rows, max_diff, max_ref);
  EXPECT_GT(max_ref, 0.05);  // outputs are not all zero
  EXPECT_LT(max_diff, 0.02);
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const auto& [warps, frags] : {std::pair{4, 2}, std::pair{4, 1}, std::pair{8, 1}, std::pair{8, 2}}) {
    cases.push_back({32, 4, 0, warps, frags});
    cases.push_back({16, 4, 0, warps, frags});
    cases.push_back({8, 4, 0, warps, frags});
    cases.push_back({32, 4, 64, warps, frags});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(GroupsAndShapes, GpuPrefillAttentionTest, ::testing::ValuesIn(Cases()));

}  // namespace
}  // namespace flotilla::inference::cuda
