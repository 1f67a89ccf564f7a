// The CPU backends' blocked attention against a direct double-precision computation, and its
// promise that a row's result does not depend on which rows share its call.
#include "blocked_attention.h"

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "thread_pool.h"

namespace flotilla::inference {
namespace {

// A paged KV store of one layer: K rows then V rows per page, kv_heads heads each.
struct Store {
  int pt, kvh, kd, vd;
  std::vector<std::vector<float>> pages;
  size_t PageFloats() const { return static_cast<size_t>(pt) * kvh * (kd + vd); }
  KvPageLayout Layout() const {
    KvPageLayout l;
    l.page_tokens = pt;
    l.k_base = 0;
    l.v_base = static_cast<size_t>(pt) * kvh * kd;
    l.k_stride = static_cast<size_t>(kvh) * kd;
    l.v_stride = static_cast<size_t>(kvh) * vd;
    l.k_head = kd;
    l.v_head = vd;
    return l;
  }
  // Fills positions [0, n) of a new sequence; returns its page table.
  std::vector<int32_t> Fill(int n, std::mt19937* rng) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<int32_t> table;
    for (int p = 0; p < (n + pt - 1) / pt; ++p) {
      table.push_back(static_cast<int32_t>(pages.size()));
      pages.emplace_back(PageFloats());
      for (float& x : pages.back()) x = dist(*rng);
    }
    return table;
  }
  const float* K(const std::vector<int32_t>& t, int pos, int h) const {
    return pages[t[pos / pt]].data() + Layout().k_base + (pos % pt) * Layout().k_stride + h * kd;
  }
  const float* V(const std::vector<int32_t>& t, int pos, int h) const {
    return pages[t[pos / pt]].data() + Layout().v_base + (pos % pt) * Layout().v_stride + h * vd;
  }
  AttnSegment Segment(const std::vector<int32_t>& t, int row0, int rows, int pos0) const {
    AttnSegment s;
    s.row0 = row0;
    s.rows = rows;
    s.pos0 = pos0;
    for (int32_t p : t) s.pages.push_back(pages[p].data());
    return s;
  }
};

std::vector<double> Reference(const Store& st, const AttnShape& a, const std::vector<int32_t>& t, int pos,
                              const float* q) {
  const int group = a.heads / a.kv_heads;
  std::vector<double> out(static_cast<size_t>(a.heads) * a.v_dim, 0.0);
  for (int h = 0; h < a.heads; ++h) {
    const int lo = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
    std::vector<double> s;
    double mx = -1e300;
    for (int j = lo; j <= pos; ++j) {
      double d = 0;
      for (int i = 0; i < a.k_dim; ++i) d += double(q[h * a.k_dim + i]) * st.K(t, j, h / group)[i];
      s.push_back(d * a.scale);
      mx = std::max(mx, s.back());
    }
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int j = lo; j <= pos; ++j) {
      for (int i = 0; i < a.v_dim; ++i) out[h * a.v_dim + i] += s[j - lo] / sum * st.V(t, j, h / group)[i];
    }
  }
  return out;
}

struct Case {
  int heads, kv_heads, kd, vd, window;
};

class BlockedAttentionTest : public ::testing::TestWithParam<std::tuple<Case, AttnIsa>> {};

TEST_P(BlockedAttentionTest, MatchesDirectComputationAcrossSegments) {
  const Case c = std::get<0>(GetParam());
  const AttnIsa isa = std::get<1>(GetParam());
  if (!AttentionIsaSupported(isa)) GTEST_SKIP() << "this CPU lacks the instruction set";
  AttnShape a{c.heads, c.kv_heads, c.kd, c.vd, 1.0f / std::sqrt(float(c.kd)), c.window};
  std::mt19937 rng(7);
  Store st{16, c.kv_heads, c.kd, c.vd, {}};
  // A prefill chunk of 150 rows at positions 70..219 of one sequence, then decode rows of two
  // sequences (positions 5 and 300).
  const auto t1 = st.Fill(220, &rng), t2 = st.Fill(6, &rng), t3 = st.Fill(301, &rng);
  const int rows = 152;
  std::vector<float> q(static_cast<size_t>(rows) * c.heads * c.kd), o(static_cast<size_t>(rows) * c.heads * c.vd);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& x : q) x = dist(rng);
  std::vector<AttnSegment> segs = {st.Segment(t1, 0, 150, 70), st.Segment(t2, 150, 1, 5), st.Segment(t3, 151, 1, 300)};
  ThreadPool pool(2);
  BlockedAttention(a, st.Layout(), segs, q.data(), o.data(), &pool, isa);
  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    const auto& t = r < 150 ? t1 : (r == 150 ? t2 : t3);
    const int pos = r < 150 ? 70 + r : (r == 150 ? 5 : 300);
    const auto want = Reference(st, a, t, pos, &q[static_cast<size_t>(r) * c.heads * c.kd]);
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::abs(want[i] - o[static_cast<size_t>(r) * c.heads * c.vd + i]));
    }
  }
  EXPECT_LT(worst, 2e-6);

  // The same rows cut into other calls give the same bits.
  std::vector<float> o2(o.size());
  for (auto [from, to] : {std::pair{0, 37}, std::pair{37, 100}, std::pair{100, 150}}) {
    std::vector<AttnSegment> part = {st.Segment(t1, from, to - from, 70 + from)};
    BlockedAttention(a, st.Layout(), part, q.data(), o2.data(), nullptr, isa);
  }
  for (size_t i = 0; i < static_cast<size_t>(150) * c.heads * c.vd; ++i) ASSERT_EQ(o[i], o2[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BlockedAttentionTest,
    ::testing::Combine(::testing::Values(Case{4, 4, 64, 64, 0}, Case{4, 2, 16, 16, 0}, Case{4, 2, 16, 16, 6},
                                         Case{2, 2, 24, 16, 0}, Case{3, 1, 12, 10, 40}, Case{2, 1, 128, 128, 0},
                                         Case{2, 2, 40, 40, 0}),
                       ::testing::Values(AttnIsa::kScalar, AttnIsa::kAvx2, AttnIsa::kAvx512)));

}  // namespace
}  // namespace flotilla::inference
