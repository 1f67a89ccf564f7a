// The CPU backend of the Hugging Face families: f32, OpenBLAS for the products, the thread
// pool for attention, over the same paged KV cache contract as the Flotilla backend. Per
// layer: RMSNorm -> attention (GQA with optional q/k norms and biases, or DeepSeek-V3's
// latent attention) -> residual -> RMSNorm -> dense MLP or MoE (hf_moe.cc) -> residual.
// A page holds, per layer, page_tokens K rows then page_tokens V rows (MLA caches the
// decompressed per-head K and V).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "blocked_attention.h"
#include "hf_ops.h"
#include "thread_pool.h"

namespace flotilla::inference {
ModelConfig HfModelSummary(const HfConfig& c) {
  ModelConfig m;
  m.vocab_size = c.vocab_size;
  m.n_layers = c.num_layers;
  m.d_model = c.hidden_size;
  m.n_heads = c.num_heads;
  m.n_kv_heads = c.kv_heads();
  m.head_dim = c.k_head_dim();
  m.rope_theta = static_cast<float>(c.rope.theta);
  m.norm_eps = c.rms_norm_eps;
  m.n_experts = std::max(1, c.num_experts);
  m.top_k = std::max(1, c.top_k);
  m.n_shared_experts = 0;
  m.expert_hidden = std::max(1, c.num_moe_layers() > 0 ? c.moe_intermediate_size : c.intermediate_size);
  m.max_context = c.max_position_embeddings;
  m.tie_embeddings = c.tie_word_embeddings;
  return m;
}

namespace {

class HfCpuBackend final : public ModelBackend {
 public:
  HfCpuBackend(std::shared_ptr<const HfWeights> w, uint32_t page_tokens, uint32_t num_pages, ThreadPool* pool)
      : w_(std::move(w)), c_(w_->config), summary_(HfModelSummary(c_)), page_tokens_(page_tokens),
        num_pages_(num_pages), pool_(pool) {
    kdim_ = c_.kv_heads() * c_.k_head_dim();
    vdim_ = c_.kv_heads() * c_.v_dim();
    page_floats_ = static_cast<size_t>(c_.num_layers) * page_tokens * (kdim_ + vdim_);
    pages_.resize(num_pages);
    c_.RopeTables(&inv_freq_, &rope_factor_);
  }

  const char* name() const override { return "cpu"; }
  const ModelConfig& config() const override { return summary_; }
  uint32_t page_tokens() const override { return page_tokens_; }
  uint32_t num_pages() const override { return num_pages_; }
  size_t page_bytes() const override { return page_floats_ * sizeof(float); }

  absl::Status SetWeights(std::shared_ptr<const ModelWeights>) override { return Refuse("SetWeights"); }
  absl::Status StageWeights(std::shared_ptr<const ModelWeights>) override { return Refuse("StageWeights"); }
  absl::StatusOr<std::shared_ptr<const void>> CommitWeights() override {
    return absl::FailedPreconditionError("no weights staged");
  }
  absl::Status SetRandomWeights(uint64_t, float) override { return Refuse("SetRandomWeights"); }

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
  static absl::Status Refuse(const char* what) {
    return absl::UnimplementedError(absl::StrCat(
        "cpu backend of a Hugging Face checkpoint: ", what, " takes Flotilla-format weights; load the folder again"));
  }
  float* Page(int32_t p) {
    auto& slot = pages_[static_cast<size_t>(p)];
    if (!slot) slot.reset(new float[page_floats_]());
    return slot.get();
  }
  float* KvAt(const std::vector<int32_t>& table, int pos, int layer, int kv) {
    float* page = Page(table[static_cast<size_t>(pos) / page_tokens_]);
    const size_t base = static_cast<size_t>(layer) * page_tokens_ * (kdim_ + vdim_);
    const size_t slot = pos % page_tokens_;
    return page + (kv == 0 ? base + slot * kdim_ : base + page_tokens_ * kdim_ + slot * vdim_);
  }
  // Rotates `dim` values at v + h * stride + offset for each head: halves, or pairs (2i, 2i+1).
  void Rope(float* v, int n_heads, int stride, int offset, int pos) const;
  // Projects xn into per-row q [H, kd], and writes each row's K [KVH, kd] and V [KVH, vd].
  void Project(const StepInput& in, int layer, const float* xn, int T, std::vector<float>* q);
  void Attention(const std::vector<AttnSegment>& segments, int layer, const float* q, float* o);

  std::shared_ptr<const HfWeights> w_;
  const HfConfig& c_;
  ModelConfig summary_;
  uint32_t page_tokens_;
  uint32_t num_pages_;
  ThreadPool* pool_;
  int kdim_ = 0, vdim_ = 0;
  size_t page_floats_ = 0;
  std::vector<std::unique_ptr<float[]>> pages_;
  std::vector<double> inv_freq_;
  double rope_factor_ = 1.0;
};

void HfCpuBackend::Rope(float* v, int n_heads, int stride, int offset, int pos) const {
  const int half = c_.rope_dim() / 2;
  for (int i = 0; i < half; ++i) {
    const float a = static_cast<float>(pos) * static_cast<float>(inv_freq_[i]);
    const float cs = static_cast<float>(std::cos(a) * rope_factor_), sn = static_cast<float>(std::sin(a) * rope_factor_);
    for (int h = 0; h < n_heads; ++h) {
      float* x = v + static_cast<size_t>(h) * stride + offset;
      const int i1 = c_.rope_interleave ? 2 * i : i, i2 = c_.rope_interleave ? 2 * i + 1 : i + half;
      const float x1 = x[i1], x2 = x[i2];
      x[i1] = x1 * cs - x2 * sn;
      x[i2] = x2 * cs + x1 * sn;
    }
  }
}

void HfCpuBackend::Project(const StepInput& in, int layer, const float* xn, int T, std::vector<float>* q) {
  const HfLayerWeights& L = w_->layers[layer];
  const int nH = c_.num_heads, kd = c_.k_head_dim();
  q->resize(static_cast<size_t>(T) * nH * kd);
  if (c_.mla) {
    const int nope = c_.qk_nope_head_dim, rope = c_.qk_rope_head_dim, vd = c_.v_head_dim, r = c_.kv_lora_rank;
    if (c_.q_lora_rank > 0) {
      std::vector<float> qa(static_cast<size_t>(T) * c_.q_lora_rank);
      HfApply(L.q_a, xn, T, qa.data());
      for (int t = 0; t < T; ++t) {
        float* row = &qa[static_cast<size_t>(t) * c_.q_lora_rank];
        HfRmsNorm(row, L.q_a_norm.data(), row, c_.q_lora_rank, c_.rms_norm_eps);
      }
      HfApply(L.q_b, qa.data(), T, q->data());
    } else {
      HfApply(L.q, xn, T, q->data());
    }
    std::vector<float> ckv(static_cast<size_t>(T) * (r + rope)), kn(static_cast<size_t>(T) * r);
    std::vector<float> kv(static_cast<size_t>(T) * nH * (nope + vd));
    HfApply(L.kv_a, xn, T, ckv.data());
    for (int t = 0; t < T; ++t) {
      HfRmsNorm(&ckv[static_cast<size_t>(t) * (r + rope)], L.kv_a_norm.data(), &kn[static_cast<size_t>(t) * r], r,
                c_.rms_norm_eps);
    }
    HfApply(L.kv_b, kn.data(), T, kv.data());
    for (int t = 0; t < T; ++t) {
      const int pos = in.positions[t];
      Rope(&(*q)[static_cast<size_t>(t) * nH * kd], nH, kd, nope, pos);
      float* krot = &ckv[static_cast<size_t>(t) * (r + rope) + r];
      Rope(krot, 1, rope, 0, pos);
      const auto& table = in.seq_pages[in.row_seq[t]];
      float* K = KvAt(table, pos, layer, 0);
      float* V = KvAt(table, pos, layer, 1);
      for (int h = 0; h < nH; ++h) {
        const float* src = &kv[(static_cast<size_t>(t) * nH + h) * (nope + vd)];
        std::memcpy(K + h * kd, src, nope * sizeof(float));
        std::memcpy(K + h * kd + nope, krot, rope * sizeof(float));
        std::memcpy(V + h * vd, src + nope, vd * sizeof(float));
      }
    }
    return;
  }
  const int hd = c_.head_dim, kvH = c_.num_kv_heads;
  std::vector<float> k(static_cast<size_t>(T) * kdim_), v(static_cast<size_t>(T) * vdim_);
  HfApply(L.q, xn, T, q->data());
  HfApply(L.k, xn, T, k.data());
  HfApply(L.v, xn, T, v.data());
  for (int t = 0; t < T; ++t) {
    float* qr = &(*q)[static_cast<size_t>(t) * nH * hd];
    float* kr = &k[static_cast<size_t>(t) * kdim_];
    if (c_.qk_norm == QkNorm::kFull) {
      HfRmsNorm(qr, L.q_norm.data(), qr, nH * hd, c_.rms_norm_eps);
      HfRmsNorm(kr, L.k_norm.data(), kr, kvH * hd, c_.rms_norm_eps);
    } else if (c_.qk_norm == QkNorm::kPerHead) {
      for (int h = 0; h < nH; ++h) HfRmsNorm(qr + h * hd, L.q_norm.data(), qr + h * hd, hd, c_.rms_norm_eps);
      for (int h = 0; h < kvH; ++h) HfRmsNorm(kr + h * hd, L.k_norm.data(), kr + h * hd, hd, c_.rms_norm_eps);
    }
    const int pos = in.positions[t];
    Rope(qr, nH, hd, 0, pos);
    Rope(kr, kvH, hd, 0, pos);
    const auto& table = in.seq_pages[in.row_seq[t]];
    std::memcpy(KvAt(table, pos, layer, 0), kr, kdim_ * sizeof(float));
    std::memcpy(KvAt(table, pos, layer, 1), &v[static_cast<size_t>(t) * vdim_], vdim_ * sizeof(float));
  }
}

void HfCpuBackend::Attention(const std::vector<AttnSegment>& segments, int layer, const float* q, float* o) {
  AttnShape shape;
  shape.heads = c_.num_heads;
  shape.kv_heads = c_.kv_heads();
  shape.k_dim = c_.k_head_dim();
  shape.v_dim = c_.v_dim();
  shape.scale = static_cast<float>(c_.attention_scale());
  shape.window = c_.sliding_window;
  KvPageLayout lay;
  lay.page_tokens = static_cast<int>(page_tokens_);
  lay.k_base = static_cast<size_t>(layer) * page_tokens_ * (kdim_ + vdim_);
  lay.v_base = lay.k_base + static_cast<size_t>(page_tokens_) * kdim_;
  lay.k_stride = kdim_;
  lay.v_stride = vdim_;
  lay.k_head = shape.k_dim;
  lay.v_head = shape.v_dim;
  BlockedAttention(shape, lay, segments, q, o, pool_);
}

absl::Status HfCpuBackend::Forward(const StepInput& in, StepOutput* out) {
  const int T = static_cast<int>(in.tokens.size());
  const int Hd = c_.hidden_size, V = c_.vocab_size, K = c_.top_k, M = c_.num_moe_layers();
  for (int r = 0; r < T; ++r) {
    if (in.tokens[r] < 0 || in.tokens[r] >= V) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", in.tokens[r], " outside [0, ", V, ")"));
    }
    if (in.positions[r] < 0 || in.positions[r] >= c_.max_position_embeddings) {
      return absl::InvalidArgumentError(absl::StrCat("position ", in.positions[r], " outside the model's context of ",
                                                     c_.max_position_embeddings, " (max_position_embeddings)"));
    }
  }
  out->experts.assign(static_cast<size_t>(T) * M * K, 0);
  if (!in.replay_experts.empty()) {
    if (in.replay_experts.size() != out->experts.size()) {
      return absl::InvalidArgumentError(absl::StrCat("replay_experts has ", in.replay_experts.size(),
                                                     " ids, rows x MoE layers x top_k is ", out->experts.size()));
    }
    for (int32_t e : in.replay_experts) {
      if (e < 0 || e >= c_.num_experts) {
        return absl::InvalidArgumentError(absl::StrCat("replayed expert ", e, " outside [0, ", c_.num_experts, ")"));
      }
    }
  }
  std::vector<float> x(static_cast<size_t>(T) * Hd), xn(x.size()), q;
  std::vector<float> o(static_cast<size_t>(T) * c_.num_heads * c_.v_dim());
  for (int r = 0; r < T; ++r) {
    std::memcpy(&x[static_cast<size_t>(r) * Hd], &w_->embed[static_cast<size_t>(in.tokens[r]) * Hd], Hd * sizeof(float));
  }
  const std::vector<AttnSegment> segments =
      SegmentRows(in.row_seq, in.positions, in.seq_pages, [&](int32_t p) -> const float* { return Page(p); });
  int m = 0;
  for (int l = 0; l < c_.num_layers; ++l) {
    const HfLayerWeights& L = w_->layers[l];
    for (int r = 0; r < T; ++r) HfRmsNorm(&x[r * Hd], L.attn_norm.data(), &xn[r * Hd], Hd, c_.rms_norm_eps);
    Project(in, l, xn.data(), T, &q);
    Attention(segments, l, q.data(), o.data());
    HfApply(L.o, o.data(), T, x.data(), /*accumulate=*/true);
    for (int r = 0; r < T; ++r) HfRmsNorm(&x[r * Hd], L.ffn_norm.data(), &xn[r * Hd], Hd, c_.rms_norm_eps);
    if (c_.moe_layer[l]) {
      HfMoe(c_, L, xn.data(), T, x.data(), out->experts.data() + m * K,
            in.replay_experts.empty() ? nullptr : in.replay_experts.data() + m * K, M * K);
      ++m;
    } else {
      HfMlp(L.gate, L.up, L.down, xn.data(), T, x.data());
    }
  }
  const int R = static_cast<int>(in.logit_rows.size());
  std::vector<float> hn(static_cast<size_t>(R) * Hd);
  for (int i = 0; i < R; ++i) {
    HfRmsNorm(&x[static_cast<size_t>(in.logit_rows[i]) * Hd], w_->norm.data(), &hn[static_cast<size_t>(i) * Hd], Hd,
              c_.rms_norm_eps);
  }
  out->logits.resize(static_cast<size_t>(R) * V);
  HfMatMulT(hn.data(), w_->head(), out->logits.data(), R, V, Hd, false);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelBackend>> CreateHfCpuBackend(std::shared_ptr<const HfWeights> weights,
                                                                 uint32_t page_tokens, uint64_t kv_bytes,
                                                                 ThreadPool* pool) {
  if (page_tokens == 0) return absl::InvalidArgumentError("kv_page_tokens must be > 0");
  const HfConfig& c = weights->config;
  const uint64_t page_bytes = uint64_t(c.num_layers) * page_tokens * c.kv_heads() * (c.k_head_dim() + c.v_dim()) * 4;
  const uint64_t pages = kv_bytes / page_bytes;
  if (pages == 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv_memory_bytes ", kv_bytes, " holds no page of ", page_bytes, " bytes"));
  }
  return std::unique_ptr<ModelBackend>(
      new HfCpuBackend(std::move(weights), page_tokens, static_cast<uint32_t>(pages), pool));
}

}  // namespace flotilla::inference
