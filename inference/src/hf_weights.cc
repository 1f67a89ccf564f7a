#include "hf_weights.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "hf_checkpoint.h"

namespace flotilla::inference {
namespace {

class Reader {
 public:
  explicit Reader(const HfCheckpoint& ckpt) : ckpt_(ckpt) {}

  absl::Status Vec(const std::string& name, std::vector<int64_t> shape, std::vector<float>* out) {
    return ckpt_.Read(name, shape, out);
  }
  // `<p>.weight` [out, in], and `<p>.bias` [out] when `bias` or when the file has one.
  absl::Status Linear(const std::string& p, int out, int in, bool bias, HfLinear* l) {
    l->out = out;
    l->in = in;
    RETURN_IF_ERROR(ckpt_.Read(p + ".weight", {out, in}, &l->w));
    if (bias || ckpt_.Has(p + ".bias")) RETURN_IF_ERROR(ckpt_.Read(p + ".bias", {out}, &l->b));
    return absl::OkStatus();
  }
  bool Has(const std::string& name) const { return ckpt_.Has(name); }

 private:
  const HfCheckpoint& ckpt_;
};

absl::Status LoadAttention(const HfConfig& c, const std::string& p, Reader& r, HfLayerWeights& L) {
  const int Hd = c.hidden_size, nH = c.num_heads;
  if (c.mla) {
    const int qk = c.k_head_dim();
    if (c.q_lora_rank > 0) {
      RETURN_IF_ERROR(r.Linear(p + "q_a_proj", c.q_lora_rank, Hd, c.qkv_bias, &L.q_a));
      RETURN_IF_ERROR(r.Vec(p + "q_a_layernorm.weight", {c.q_lora_rank}, &L.q_a_norm));
      RETURN_IF_ERROR(r.Linear(p + "q_b_proj", nH * qk, c.q_lora_rank, false, &L.q_b));
    } else {
      RETURN_IF_ERROR(r.Linear(p + "q_proj", nH * qk, Hd, false, &L.q));
    }
    RETURN_IF_ERROR(r.Linear(p + "kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, Hd, c.qkv_bias, &L.kv_a));
    RETURN_IF_ERROR(r.Vec(p + "kv_a_layernorm.weight", {c.kv_lora_rank}, &L.kv_a_norm));
    RETURN_IF_ERROR(r.Linear(p + "kv_b_proj", nH * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, false, &L.kv_b));
    return r.Linear(p + "o_proj", Hd, nH * c.v_head_dim, c.qkv_bias, &L.o);
  }
  const int hd = c.head_dim, kv = c.num_kv_heads;
  RETURN_IF_ERROR(r.Linear(p + "q_proj", nH * hd, Hd, c.qkv_bias, &L.q));
  RETURN_IF_ERROR(r.Linear(p + "k_proj", kv * hd, Hd, c.qkv_bias, &L.k));
  RETURN_IF_ERROR(r.Linear(p + "v_proj", kv * hd, Hd, c.qkv_bias, &L.v));
  RETURN_IF_ERROR(r.Linear(p + "o_proj", Hd, nH * hd, c.o_bias, &L.o));
  if (c.qk_norm == QkNorm::kPerHead) {
    RETURN_IF_ERROR(r.Vec(p + "q_norm.weight", {hd}, &L.q_norm));
    RETURN_IF_ERROR(r.Vec(p + "k_norm.weight", {hd}, &L.k_norm));
  } else if (c.qk_norm == QkNorm::kFull) {
    RETURN_IF_ERROR(r.Vec(p + "q_norm.weight", {nH * hd}, &L.q_norm));
    RETURN_IF_ERROR(r.Vec(p + "k_norm.weight", {kv * hd}, &L.k_norm));
  }
  return absl::OkStatus();
}

absl::Status LoadMlp(const std::string& p, int I, int Hd, Reader& r, HfLinear* g, HfLinear* u, HfLinear* d) {
  RETURN_IF_ERROR(r.Linear(p + "gate_proj", I, Hd, false, g));
  RETURN_IF_ERROR(r.Linear(p + "up_proj", I, Hd, false, u));
  return r.Linear(p + "down_proj", Hd, I, false, d);
}

// The routed experts into [E, 2I, H] and [E, H, I], from either layout.
absl::Status LoadExperts(const HfConfig& c, const std::string& p, Reader& r, HfLayerWeights& L) {
  const int64_t E = c.num_experts, I = c.moe_intermediate_size, Hd = c.hidden_size;
  if (r.Has(p + "experts.gate_up_proj") ||
      (!r.Has(p + "experts.0.gate_proj.weight") && !r.Has(p + "experts.0.w1.weight"))) {
    RETURN_IF_ERROR(r.Vec(p + "experts.gate_up_proj", {E, 2 * I, Hd}, &L.gate_up));
    return r.Vec(p + "experts.down_proj", {E, Hd, I}, &L.experts_down);
  }
  const bool mixtral_names = !r.Has(p + "experts.0.gate_proj.weight");
  L.gate_up.resize(static_cast<size_t>(E * 2 * I * Hd));
  L.experts_down.resize(static_cast<size_t>(E * Hd * I));
  std::vector<float> t;
  for (int64_t e = 0; e < E; ++e) {
    const std::string q = absl::StrCat(p, "experts.", e, ".");
    const size_t m = static_cast<size_t>(I * Hd);
    RETURN_IF_ERROR(r.Vec(q + (mixtral_names ? "w1" : "gate_proj") + ".weight", {I, Hd}, &t));
    std::memcpy(&L.gate_up[e * 2 * m], t.data(), m * sizeof(float));
    RETURN_IF_ERROR(r.Vec(q + (mixtral_names ? "w3" : "up_proj") + ".weight", {I, Hd}, &t));
    std::memcpy(&L.gate_up[e * 2 * m + m], t.data(), m * sizeof(float));
    RETURN_IF_ERROR(r.Vec(q + (mixtral_names ? "w2" : "down_proj") + ".weight", {Hd, I}, &t));
    std::memcpy(&L.experts_down[e * m], t.data(), m * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status LoadFfn(const HfConfig& c, int l, const std::string& lp, Reader& r, HfLayerWeights& L) {
  const int Hd = c.hidden_size;
  if (!c.moe_layer[l]) return LoadMlp(lp + "mlp.", c.intermediate_size, Hd, r, &L.gate, &L.up, &L.down);
  // Mixtral's original checkpoints call the block `block_sparse_moe`.
  const std::string p = r.Has(lp + "block_sparse_moe.gate.weight") ? lp + "block_sparse_moe." : lp + "mlp.";
  RETURN_IF_ERROR(r.Vec(p + "gate.weight", {c.num_experts, Hd}, &L.router));
  if (c.router == Router::kSigmoidGrouped) {
    RETURN_IF_ERROR(r.Vec(p + "gate.e_score_correction_bias", {c.num_experts}, &L.score_bias));
  }
  RETURN_IF_ERROR(LoadExperts(c, p, r, L));
  if (c.shared_intermediate_size > 0) {
    const std::string sp = c.family == HfFamily::kQwen2Moe ? p + "shared_expert." : p + "shared_experts.";
    RETURN_IF_ERROR(LoadMlp(sp, c.shared_intermediate_size, Hd, r, &L.sh_gate, &L.sh_up, &L.sh_down));
    if (c.shared_expert_gate) RETURN_IF_ERROR(r.Vec(p + "shared_expert_gate.weight", {1, Hd}, &L.sh_gate_w));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const HfWeights>> HfWeights::Load(const HfConfig& c, const HfCheckpoint& ckpt) {
  auto w = std::make_shared<HfWeights>();
  w->config = c;
  w->source = ckpt.dir();
  Reader r(ckpt);
  const int64_t V = c.vocab_size, Hd = c.hidden_size;
  RETURN_IF_ERROR(r.Vec("model.embed_tokens.weight", {V, Hd}, &w->embed));
  RETURN_IF_ERROR(r.Vec("model.norm.weight", {Hd}, &w->norm));
  if (!c.tie_word_embeddings) RETURN_IF_ERROR(r.Vec("lm_head.weight", {V, Hd}, &w->lm_head));
  w->layers.resize(static_cast<size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    HfLayerWeights& L = w->layers[l];
    const std::string lp = absl::StrCat("model.layers.", l, ".");
    RETURN_IF_ERROR(r.Vec(lp + "input_layernorm.weight", {Hd}, &L.attn_norm));
    RETURN_IF_ERROR(r.Vec(lp + "post_attention_layernorm.weight", {Hd}, &L.ffn_norm));
    RETURN_IF_ERROR(LoadAttention(c, lp + "self_attn.", r, L));
    RETURN_IF_ERROR(LoadFfn(c, l, lp, r, L));
  }
  return std::shared_ptr<const HfWeights>(std::move(w));
}

}  // namespace flotilla::inference
