// The CPU backend: f32 everywhere, OpenBLAS for the dense products, the thread pool for
// attention. Computes exactly the function of trainer_bridge/python/flotilla_trainer/model.py.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "blocked_attention.h"
#include "thread_pool.h"

namespace flotilla::inference {
namespace {

// y[M,N] = x[M,K] * W[N,K]^T (+ y when accumulate).
void MatMulT(const float* x, const float* w, float* y, int M, int N, int K, bool accumulate) {
  if (M == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, w, K, x, 1, accumulate ? 1.0f : 0.0f, y, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K,
              accumulate ? 1.0f : 0.0f, y, N);
}

void RmsNorm(const float* x, const float* w, float* y, int D, float eps) {
  float ss = 0;
  for (int i = 0; i < D; ++i) ss += x[i] * x[i];
  float r = 1.0f / std::sqrt(ss / static_cast<float>(D) + eps);
  for (int i = 0; i < D; ++i) y[i] = x[i] * r * w[i];
}

class CpuBackend final : public ModelBackend {
 public:
  CpuBackend(const ModelConfig& c, uint32_t page_tokens, uint32_t num_pages, ThreadPool* pool)
      : c_(c), page_tokens_(page_tokens), num_pages_(num_pages), pool_(pool) {
    kvd_ = c.n_kv_heads * c.head_dim;
    page_floats_ = static_cast<size_t>(c.n_layers) * 2 * page_tokens * kvd_;
    pages_.resize(num_pages);
    const int half = c.head_dim / 2;
    inv_freq_.resize(half);
    for (int i = 0; i < half; ++i) {
      inv_freq_[i] = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / c.head_dim);
    }
    sliding_.assign(c.n_layers, false);
    for (int l : c.sliding_layers) sliding_[l] = true;
  }

  const char* name() const override { return "cpu"; }
  const ModelConfig& config() const override { return c_; }
  uint32_t page_tokens() const override { return page_tokens_; }
  uint32_t num_pages() const override { return num_pages_; }
  size_t page_bytes() const override { return page_floats_ * sizeof(float); }

  absl::Status SetWeights(std::shared_ptr<const ModelWeights> w) override {
    w_ = std::move(w);
    return absl::OkStatus();
  }

  // The CPU backend computes from the loaded f32 weights directly: staging only holds them.
  absl::Status StageWeights(std::shared_ptr<const ModelWeights> w) override {
    staged_ = std::move(w);
    return absl::OkStatus();
  }

  absl::StatusOr<std::shared_ptr<const void>> CommitWeights() override {
    if (staged_ == nullptr) return absl::FailedPreconditionError("no weights staged");
    return std::shared_ptr<const void>(std::exchange(w_, std::move(staged_)));
  }

  absl::Status SetRandomWeights(uint64_t seed, float stddev) override {
    w_ = ModelWeights::Random(c_, seed, stddev, 0);
    return absl::OkStatus();
  }

  absl::Status ReadPage(int32_t page, uint8_t* dst) override {
    std::memcpy(dst, Page(page), page_bytes());
    return absl::OkStatus();
  }
  absl::Status WritePage(int32_t page, const uint8_t* src) override {
    std::memcpy(Page(page), src, page_bytes());
    return absl::OkStatus();
  }

  absl::Status Forward(const StepInput& in, StepOutput* out) override;

 private:
  float* Page(int32_t p) {
    auto& slot = pages_[static_cast<size_t>(p)];
    if (!slot) slot.reset(new float[page_floats_]());
    return slot.get();
  }
  // K (kv = 0) or V (kv = 1) of one position in one layer.
  float* KvAt(const std::vector<int32_t>& table, int pos, int layer, int kv) {
    float* page = Page(table[static_cast<size_t>(pos) / page_tokens_]);
    size_t off = ((static_cast<size_t>(layer) * 2 + kv) * page_tokens_ + pos % page_tokens_) * kvd_;
    return page + off;
  }
  void Rope(float* v, int n_heads, int pos) const;
  void Attention(const std::vector<AttnSegment>& segments, int layer, const float* q, float* o);
  void Moe(int layer, const float* xn, int T, float* x, int32_t* experts, const int32_t* replay);

  ModelConfig c_;
  uint32_t page_tokens_;
  uint32_t num_pages_;
  ThreadPool* pool_;
  int kvd_ = 0;
  size_t page_floats_ = 0;
  std::vector<std::unique_ptr<float[]>> pages_;
  std::vector<double> inv_freq_;
  std::vector<bool> sliding_;
  std::shared_ptr<const ModelWeights> w_;
  std::shared_ptr<const ModelWeights> staged_;  // touched only by StageWeights and CommitWeights
};

void CpuBackend::Rope(float* v, int n_heads, int pos) const {
  const int hd = c_.head_dim, half = hd / 2;
  for (int i = 0; i < half; ++i) {
    double a = static_cast<double>(pos) * inv_freq_[i];
    float cs = static_cast<float>(std::cos(a)), sn = static_cast<float>(std::sin(a));
    for (int h = 0; h < n_heads; ++h) {
      float* x = v + h * hd;
      float x1 = x[i], x2 = x[i + half];
      x[i] = x1 * cs - x2 * sn;
      x[i + half] = x2 * cs + x1 * sn;
    }
  }
}

void CpuBackend::Attention(const std::vector<AttnSegment>& segments, int layer, const float* q, float* o) {
  AttnShape shape;
  shape.heads = c_.n_heads;
  shape.kv_heads = c_.n_kv_heads;
  shape.k_dim = shape.v_dim = c_.head_dim;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
  shape.window = sliding_[layer] ? c_.sliding_window : 0;
  KvPageLayout lay;
  lay.page_tokens = static_cast<int>(page_tokens_);
  lay.k_base = static_cast<size_t>(layer) * 2 * page_tokens_ * kvd_;
  lay.v_base = lay.k_base + static_cast<size_t>(page_tokens_) * kvd_;
  lay.k_stride = lay.v_stride = kvd_;
  lay.k_head = lay.v_head = c_.head_dim;
  BlockedAttention(shape, lay, segments, q, o, pool_);
}

void CpuBackend::Moe(int layer, const float* xn, int T, float* x, int32_t* experts, const int32_t* replay) {
  const LayerWeights& L = w_->layers[layer];
  const int D = c_.d_model, E = c_.n_experts, F = c_.expert_hidden, K = c_.top_k;
  const int LK = c_.n_layers * K;
  std::vector<float> logits(static_cast<size_t>(T) * E);
  MatMulT(xn, L.router.data(), logits.data(), T, E, D, false);
  // Router: softmax, top-k descending (ties: lower id), weights renormalised.
  std::vector<std::vector<std::pair<int, float>>> by_expert(E);  // (row, weight)
  std::vector<int> order(E);
  for (int r = 0; r < T; ++r) {
    float* lg = &logits[static_cast<size_t>(r) * E];
    float mx = *std::max_element(lg, lg + E), sum = 0;
    for (int e = 0; e < E; ++e) sum += (lg[e] = std::exp(lg[e] - mx));
    for (int e = 0; e < E; ++e) lg[e] /= sum;
    for (int e = 0; e < E; ++e) order[e] = e;
    if (replay != nullptr) {
      for (int k = 0; k < K; ++k) order[k] = replay[static_cast<size_t>(r) * LK + layer * K + k];
    } else {
      std::partial_sort(order.begin(), order.begin() + K, order.end(),
                        [&](int a, int b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
    }
    float tot = 0;
    for (int k = 0; k < K; ++k) tot += lg[order[k]];
    for (int k = 0; k < K; ++k) {
      experts[static_cast<size_t>(r) * LK + layer * K + k] = order[k];
      by_expert[order[k]].push_back({r, lg[order[k]] / tot});
    }
  }
  std::vector<float> y(static_cast<size_t>(T) * D, 0.0f);
  std::vector<float> xin, g, u, o;
  auto run_expert = [&](const float* w1, const float* w3, const float* w2, const float* in, int n) {
    g.resize(static_cast<size_t>(n) * F);
    u.resize(static_cast<size_t>(n) * F);
    o.resize(static_cast<size_t>(n) * D);
    MatMulT(in, w1, g.data(), n, F, D, false);
    MatMulT(in, w3, u.data(), n, F, D, false);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    MatMulT(g.data(), w2, o.data(), n, D, F, false);
  };
  const size_t ew = static_cast<size_t>(F) * D;
  for (int e = 0; e < E; ++e) {
    const auto& rows = by_expert[e];
    if (rows.empty()) continue;
    const int n = static_cast<int>(rows.size());
    xin.resize(static_cast<size_t>(n) * D);
    for (int i = 0; i < n; ++i) {
      std::memcpy(&xin[static_cast<size_t>(i) * D], xn + static_cast<size_t>(rows[i].first) * D, D * sizeof(float));
    }
    run_expert(&L.w1[e * ew], &L.w3[e * ew], &L.w2[e * ew], xin.data(), n);
    for (int i = 0; i < n; ++i) {
      float* yr = &y[static_cast<size_t>(rows[i].first) * D];
      const float wgt = rows[i].second;
      for (int d = 0; d < D; ++d) yr[d] += o[static_cast<size_t>(i) * D + d] * wgt;
    }
  }
  for (int s = 0; s < c_.n_shared_experts; ++s) {
    run_expert(&L.s1[s * ew], &L.s3[s * ew], &L.s2[s * ew], xn, T);
    for (size_t i = 0; i < y.size(); ++i) y[i] += o[i];
  }
  for (size_t i = 0; i < y.size(); ++i) x[i] += y[i];
}

absl::Status CpuBackend::Forward(const StepInput& in, StepOutput* out) {
  if (!w_) return absl::FailedPreconditionError("cpu backend: no weights loaded");
  const int T = static_cast<int>(in.tokens.size());
  const int D = c_.d_model, H = c_.n_heads, hd = c_.head_dim, KVH = c_.n_kv_heads;
  const int V = c_.vocab_size;
  for (int r = 0; r < T; ++r) {
    if (in.tokens[r] < 0 || in.tokens[r] >= V) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", in.tokens[r], " outside [0, ", V, ")"));
    }
  }
  std::vector<float> x(static_cast<size_t>(T) * D), xn(x.size());
  std::vector<float> q(static_cast<size_t>(T) * H * hd), k(static_cast<size_t>(T) * KVH * hd);
  std::vector<float> v(k.size()), o(q.size());
  for (int r = 0; r < T; ++r) {
    std::memcpy(&x[static_cast<size_t>(r) * D], &w_->embed[static_cast<size_t>(in.tokens[r]) * D], D * sizeof(float));
  }
  out->experts.assign(static_cast<size_t>(T) * c_.n_layers * c_.top_k, 0);
  const int32_t* replay = nullptr;
  if (!in.replay_experts.empty()) {
    if (in.replay_experts.size() != out->experts.size()) {
      return absl::InvalidArgumentError(absl::StrCat("replay_experts has ", in.replay_experts.size(),
                                                     " ids, rows x n_layers x top_k is ", out->experts.size()));
    }
    for (int32_t e : in.replay_experts) {
      if (e < 0 || e >= c_.n_experts) return absl::InvalidArgumentError(absl::StrCat("replayed expert ", e, " outside [0, ", c_.n_experts, ")"));
    }
    replay = in.replay_experts.data();
  }
  const std::vector<AttnSegment> segments =
      SegmentRows(in.row_seq, in.positions, in.seq_pages, [&](int32_t p) -> const float* { return Page(p); });
  for (int l = 0; l < c_.n_layers; ++l) {
    const LayerWeights& L = w_->layers[l];
    for (int r = 0; r < T; ++r) RmsNorm(&x[r * D], L.attn_norm.data(), &xn[r * D], D, c_.norm_eps);
    MatMulT(xn.data(), L.wq.data(), q.data(), T, H * hd, D, false);
    MatMulT(xn.data(), L.wk.data(), k.data(), T, KVH * hd, D, false);
    MatMulT(xn.data(), L.wv.data(), v.data(), T, KVH * hd, D, false);
    for (int r = 0; r < T; ++r) {
      Rope(&q[static_cast<size_t>(r) * H * hd], H, in.positions[r]);
      Rope(&k[static_cast<size_t>(r) * kvd_], KVH, in.positions[r]);
      const auto& table = in.seq_pages[in.row_seq[r]];
      std::memcpy(KvAt(table, in.positions[r], l, 0), &k[static_cast<size_t>(r) * kvd_], kvd_ * sizeof(float));
      std::memcpy(KvAt(table, in.positions[r], l, 1), &v[static_cast<size_t>(r) * kvd_], kvd_ * sizeof(float));
    }
    Attention(segments, l, q.data(), o.data());
    MatMulT(o.data(), L.wo.data(), x.data(), T, D, H * hd, true);
    for (int r = 0; r < T; ++r) RmsNorm(&x[r * D], L.ffn_norm.data(), &xn[r * D], D, c_.norm_eps);
    Moe(l, xn.data(), T, x.data(), out->experts.data(), replay);
  }
  const int R = static_cast<int>(in.logit_rows.size());
  std::vector<float> hn(static_cast<size_t>(R) * D);
  for (int i = 0; i < R; ++i) RmsNorm(&x[static_cast<size_t>(in.logit_rows[i]) * D], w_->norm.data(), &hn[static_cast<size_t>(i) * D], D, c_.norm_eps);
  out->logits.resize(static_cast<size_t>(R) * V);
  if (R > 0) MatMulT(hn.data(), w_->head(), out->logits.data(), R, V, D, false);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCpuBackend(const ModelConfig& config,
                                                               uint32_t page_tokens,
                                                               uint64_t kv_bytes,
                                                               ThreadPool* pool) {
  if (page_tokens == 0) return absl::InvalidArgumentError("kv_page_tokens must be > 0");
  const uint64_t page_bytes = uint64_t(config.n_layers) * 2 * page_tokens * config.n_kv_heads * config.head_dim * 4;
  const uint64_t pages = kv_bytes / page_bytes;
  if (pages == 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv_memory_bytes ", kv_bytes, " holds no page of ", page_bytes, " bytes"));
  }
  return std::unique_ptr<ModelBackend>(new CpuBackend(config, page_tokens, static_cast<uint32_t>(pages), pool));
}

}  // namespace flotilla::inference
