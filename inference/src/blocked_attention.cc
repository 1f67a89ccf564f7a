#include "blocked_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "thread_pool.h"

namespace flotilla::inference {
namespace {

constexpr int kQueryBlock = 32;  // rows per job

struct Job {
  int seg, kv_head, r0, r1;  // rows [r0, r1) of the segment
};

// Per-thread buffers, grown as needed.
struct Scratch {
  std::vector<float> kt, s, acc, m, l;
  std::vector<const float*> v;
};

void RunJob(const AttnKernels& kn, const AttnShape& a, const KvPageLayout& lay, const AttnSegment& seg, const Job& job,
            const float* q, float* o) {
  thread_local Scratch sc;
  const int group = a.heads / a.kv_heads, kd = a.k_dim, vd = a.v_dim, pt = lay.page_tokens;
  const int n = job.r1 - job.r0, states = n * group;
  sc.kt.resize(static_cast<size_t>(kd) * kKeyTile);
  sc.s.resize(kKeyTile);
  sc.v.resize(kKeyTile);
  sc.acc.assign(static_cast<size_t>(states) * vd, 0.0f);
  sc.m.assign(states, -std::numeric_limits<float>::infinity());
  sc.l.assign(states, 0.0f);
  const int p_first = seg.pos0 + job.r0, p_last = seg.pos0 + job.r1 - 1;
  const int lo_min = a.window > 0 ? std::max(0, p_first - a.window + 1) : 0;
  auto k_row = [&](int pos) {
    return seg.pages[pos / pt] + lay.k_base + static_cast<size_t>(pos % pt) * lay.k_stride + job.kv_head * lay.k_head;
  };
  auto v_row = [&](int pos) {
    return seg.pages[pos / pt] + lay.v_base + static_cast<size_t>(pos % pt) * lay.v_stride + job.kv_head * lay.v_head;
  };
  for (int k0 = lo_min / kKeyTile * kKeyTile; k0 <= p_last; k0 += kKeyTile) {
    const int count = std::min(kKeyTile, p_last + 1 - k0);
    for (int j = 0; j < count; ++j) {
      const float* kr = k_row(k0 + j);
      for (int d = 0; d < kd; ++d) sc.kt[static_cast<size_t>(d) * kKeyTile + j] = kr[d];
      sc.v[j] = v_row(k0 + j);
    }
    for (int j = count; j < kKeyTile; ++j) {
      for (int d = 0; d < kd; ++d) sc.kt[static_cast<size_t>(d) * kKeyTile + j] = 0.0f;
    }
    for (int i = 0; i < n; ++i) {
      const int pos = p_first + i;
      const int lo = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
      if (k0 > pos || k0 + kKeyTile <= lo) continue;
      const int jlo = std::max(0, lo - k0), jhi = std::min(count, pos - k0 + 1);
      const int row = seg.row0 + job.r0 + i;
      for (int g = 0; g < group; ++g) {
        const int h = job.kv_head * group + g, st = i * group + g;
        float* s = sc.s.data();
        kn.scores(q + (static_cast<size_t>(row) * a.heads + h) * kd, sc.kt.data(), kd, a.scale, s);
        const float mx = kn.max_range(s, jlo, jhi);
        const float m_new = std::max(sc.m[st], mx);
        const float corr = std::exp(sc.m[st] - m_new);  // 0 on the first tile
        const float sum = kn.exp_shift(s, jlo, jhi, m_new);
        float* acc = &sc.acc[static_cast<size_t>(st) * vd];
        if (corr != 1.0f) {
          for (int d = 0; d < vd; ++d) acc[d] *= corr;
        }
        sc.l[st] = sc.l[st] * corr + sum;
        sc.m[st] = m_new;
        kn.pv(s, sc.v.data(), jlo, jhi, vd, acc);
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    const int row = seg.row0 + job.r0 + i;
    for (int g = 0; g < group; ++g) {
      const int h = job.kv_head * group + g, st = i * group + g;
      const float inv = 1.0f / sc.l[st];
      const float* acc = &sc.acc[static_cast<size_t>(st) * vd];
      float* out = o + (static_cast<size_t>(row) * a.heads + h) * vd;
      for (int d = 0; d < vd; ++d) out[d] = acc[d] * inv;
    }
  }
}

}  // namespace

bool AttentionIsaSupported(AttnIsa isa) { return AttnKernelsFor(isa) != nullptr; }

void BlockedAttention(const AttnShape& shape, const KvPageLayout& layout, const std::vector<AttnSegment>& segments,
                      const float* q, float* o, ThreadPool* pool, AttnIsa isa) {
  const AttnKernels* picked = AttnKernelsFor(isa);
  const AttnKernels& kn = picked != nullptr ? *picked : *AttnKernelsFor(AttnIsa::kBest);
  std::vector<Job> jobs;
  for (int s = 0; s < static_cast<int>(segments.size()); ++s) {
    for (int r0 = 0; r0 < segments[s].rows; r0 += kQueryBlock) {
      const int r1 = std::min(segments[s].rows, r0 + kQueryBlock);
      for (int g = 0; g < shape.kv_heads; ++g) jobs.push_back({s, g, r0, r1});
    }
  }
  // The longest jobs (latest positions) first, so the pool's threads finish together.
  std::stable_sort(jobs.begin(), jobs.end(), [&](const Job& x, const Job& y) {
    return segments[x.seg].pos0 + x.r1 > segments[y.seg].pos0 + y.r1;
  });
  auto run = [&](int i) { RunJob(kn, shape, layout, segments[jobs[i].seg], jobs[i], q, o); };
  if (pool != nullptr && jobs.size() > 1) {
    pool->ParallelFor(static_cast<int>(jobs.size()), run);
  } else {
    for (int i = 0; i < static_cast<int>(jobs.size()); ++i) run(i);
  }
}

}  // namespace flotilla::inference
