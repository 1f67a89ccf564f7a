#include "cuda/hf_upload.h"

#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "hf_checkpoint.h"

namespace flotilla::inference::cuda {
namespace {

// The widest latent-attention key head LaunchPagedAttention takes (its wide instantiation,
// paged_attention.cu); DeepSeek-V3's is 192.
constexpr int kMaxMlaKeyWidth = 256;

// The checkpoint's tensors as upload parts: bf16 and f32 as mapped, other dtypes widened to
// f32 and kept here until Release.
class Source {
 public:
  explicit Source(const HfCheckpoint& ckpt) : ckpt_(ckpt) {}

  absl::StatusOr<Part> Get(const std::string& name, const std::vector<int64_t>& shape) {
    ASSIGN_OR_RETURN(const TensorView* v, ckpt_.View(name, shape));
    if (v->dtype == DType::kBF16 || v->dtype == DType::kF32) {
      return Part{v->data, v->dtype, static_cast<size_t>(v->numel())};
    }
    widened_.emplace_back();
    RETURN_IF_ERROR(ckpt_.Read(name, shape, &widened_.back()));
    return PartOf(widened_.back());
  }
  bool Has(const std::string& name) const { return ckpt_.Has(name); }
  // The named vectors, widened to f32, one after another into `out`; a missing name adds
  // `size` zeros when `zeros_if_missing`.
  absl::Status Concat(const std::vector<std::pair<std::string, int64_t>>& names, bool zeros_if_missing,
                      std::vector<float>* out) {
    std::vector<float> v;
    for (const auto& [name, size] : names) {
      if (zeros_if_missing && !ckpt_.Has(name)) {
        out->insert(out->end(), static_cast<size_t>(size), 0.0f);
        continue;
      }
      RETURN_IF_ERROR(ckpt_.Read(name, {size}, &v));
      out->insert(out->end(), v.begin(), v.end());
    }
    return absl::OkStatus();
  }
  void Release() { widened_.clear(); }

 private:
  const HfCheckpoint& ckpt_;
  std::deque<std::vector<float>> widened_;  // stable addresses while parts point into them
};

struct Uploader {
  Source& src;
  PinnedBuffer* staging;
  cudaStream_t stream;

  // The named tensors, one after another, as one bf16 matrix.
  absl::Status Bf16(DeviceBuffer* dst, const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
    std::vector<Part> parts;
    std::vector<size_t> sizes;
    for (const auto& [name, shape] : tensors) {
      ASSIGN_OR_RETURN(Part p, src.Get(name, shape));
      parts.push_back(p);
      sizes.push_back(p.size);
    }
    return UploadBf16(dst, parts, sizes, staging, stream);
  }
  absl::Status F32(DeviceBuffer* dst, const std::string& name, int64_t n) {
    ASSIGN_OR_RETURN(Part p, src.Get(name, {n}));
    return UploadF32(dst, p, stream);
  }
};

// DeepSeek-V3's attention weights: q (through q_lora or directly) into wqkv, the latent and the
// shared key rotation rows of kv_a_proj_with_mqa apart, kv_b, and o_proj with each head's v_head_dim
// columns followed by zeros up to the key width. With attention_bias (transformers'
// DeepseekV3Attention): the biases of q_a_proj, kv_a_proj_with_mqa (split as its rows) and o_proj.
absl::Status UploadLatentAttention(const HfConfig& c, const std::string& ap, Uploader& up, DeviceLayer* d) {
  const int64_t Hd = c.hidden_size, H = c.num_heads, kd = c.k_head_dim(), r = c.kv_lora_rank;
  const int64_t rope = c.qk_rope_head_dim, nope = c.qk_nope_head_dim, vd = c.v_head_dim, rq = c.q_lora_rank;
  if (rq > 0) {
    RETURN_IF_ERROR(up.Bf16(&d->q_a, {{ap + "q_a_proj.weight", {rq, Hd}}}));
    RETURN_IF_ERROR(up.F32(&d->q_a_norm, ap + "q_a_layernorm.weight", rq));
    RETURN_IF_ERROR(up.Bf16(&d->wqkv, {{ap + "q_b_proj.weight", {H * kd, rq}}}));
  } else {
    RETURN_IF_ERROR(up.Bf16(&d->wqkv, {{ap + "q_proj.weight", {H * kd, Hd}}}));
  }
  ASSIGN_OR_RETURN(const Part kv_a, up.src.Get(ap + "kv_a_proj_with_mqa.weight", {r + rope, Hd}));
  const size_t esize = kv_a.dtype == DType::kF32 ? 4 : 2, latent = static_cast<size_t>(r * Hd);
  RETURN_IF_ERROR(UploadOne(&d->kv_a, {kv_a.data, kv_a.dtype, latent}, up.staging, up.stream));
  RETURN_IF_ERROR(UploadOne(&d->kv_pe, {kv_a.data + latent * esize, kv_a.dtype, kv_a.size - latent}, up.staging, up.stream));
  RETURN_IF_ERROR(up.F32(&d->kv_a_norm, ap + "kv_a_layernorm.weight", r));
  RETURN_IF_ERROR(up.Bf16(&d->kv_b, {{ap + "kv_b_proj.weight", {H * (nope + vd), r}}}));
  if (c.qkv_bias) {
    if (rq > 0) RETURN_IF_ERROR(up.F32(&d->q_a_bias, ap + "q_a_proj.bias", rq));
    std::vector<float> b;
    RETURN_IF_ERROR(up.src.Concat({{ap + "kv_a_proj_with_mqa.bias", r + rope}}, false, &b));
    RETURN_IF_ERROR(UploadF32(&d->kv_a_bias, {reinterpret_cast<const uint8_t*>(b.data()), DType::kF32,
                                              static_cast<size_t>(r)}, up.stream));
    RETURN_IF_ERROR(UploadF32(&d->kv_pe_bias, {reinterpret_cast<const uint8_t*>(b.data() + r), DType::kF32,
                                               static_cast<size_t>(rope)}, up.stream));
    RETURN_IF_ERROR(up.F32(&d->bo, ap + "o_proj.bias", Hd));
  }
  ASSIGN_OR_RETURN(const Part o, up.src.Get(ap + "o_proj.weight", {Hd, H * vd}));
  if (vd == kd) return UploadOne(&d->wo, o, up.staging, up.stream);
  const std::vector<float> zeros(static_cast<size_t>(Hd * H * (kd - vd)), 0.0f);
  return UploadBf16(&d->wo, {o, PartOf(zeros)}, {static_cast<size_t>(vd), static_cast<size_t>(kd - vd)}, up.staging,
                    up.stream);
}

}  // namespace

absl::Status HfCudaSupports(const HfConfig& c) {
  if (c.mla) {
    if (c.k_head_dim() > kMaxMlaKeyWidth) {
      return absl::UnimplementedError(absl::StrCat("cuda backend: config.json qk_nope_head_dim + qk_rope_head_dim = ",
                                                   c.k_head_dim(), " over the attention kernels' ", kMaxMlaKeyWidth));
    }
    if (c.v_head_dim > c.k_head_dim()) {
      return absl::UnimplementedError(absl::StrCat("cuda backend: config.json v_head_dim ", c.v_head_dim,
                                                   " over qk_nope_head_dim + qk_rope_head_dim (", c.k_head_dim(), ")"));
    }
  }
  if (!c.mla && c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: head_dim ", c.head_dim, " must be even for RoPE"));
  }
  if (c.num_moe_layers() > 0 && (c.num_experts > 256 || c.top_k > 16)) {
    return absl::UnimplementedError(absl::StrCat("cuda backend: config.json num_experts ", c.num_experts, " / num_experts_per_tok ",
                                                 c.top_k, " over the router's limits (256 / 16)"));
  }
  return absl::OkStatus();
}

absl::Status UploadHfWeights(const HfConfig& c, const HfCheckpoint& ckpt, DeviceWeights* dw, PinnedBuffer* staging,
                             cudaStream_t stream) {
  Source src(ckpt);
  Uploader up{src, staging, stream};
  const int64_t V = c.vocab_size, Hd = c.hidden_size, hd = c.head_dim, H = c.num_heads, KV = c.num_kv_heads;
  const int64_t E = c.num_experts, I = c.moe_intermediate_size, Id = c.intermediate_size;
  RETURN_IF_ERROR(up.Bf16(&dw->embed, {{"model.embed_tokens.weight", {V, Hd}}}));
  dw->tied = c.tie_word_embeddings;
  if (!dw->tied) RETURN_IF_ERROR(up.Bf16(&dw->head, {{"lm_head.weight", {V, Hd}}}));
  RETURN_IF_ERROR(up.F32(&dw->norm, "model.norm.weight", Hd));
  dw->layers.resize(static_cast<size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    DeviceLayer& d = dw->layers[l];
    const std::string lp = absl::StrCat("model.layers.", l, "."), ap = lp + "self_attn.";
    RETURN_IF_ERROR(up.F32(&d.attn_norm, lp + "input_layernorm.weight", Hd));
    RETURN_IF_ERROR(up.F32(&d.ffn_norm, lp + "post_attention_layernorm.weight", Hd));
    if (c.mla) {
      RETURN_IF_ERROR(UploadLatentAttention(c, ap, up, &d));
    } else {
    RETURN_IF_ERROR(up.Bf16(&d.wqkv, {{ap + "q_proj.weight", {H * hd, Hd}},
                                      {ap + "k_proj.weight", {KV * hd, Hd}},
                                      {ap + "v_proj.weight", {KV * hd, Hd}}}));
    RETURN_IF_ERROR(up.Bf16(&d.wo, {{ap + "o_proj.weight", {Hd, H * hd}}}));
    // Biases where config.json asks for them or the file has them (as the CPU backend reads them).
    const std::vector<std::pair<std::string, int64_t>> qkv_bias = {
        {ap + "q_proj.bias", H * hd}, {ap + "k_proj.bias", KV * hd}, {ap + "v_proj.bias", KV * hd}};
    if (c.qkv_bias || src.Has(qkv_bias[0].first) || src.Has(qkv_bias[1].first) || src.Has(qkv_bias[2].first)) {
      std::vector<float> b;
      RETURN_IF_ERROR(src.Concat(qkv_bias, !c.qkv_bias, &b));
      RETURN_IF_ERROR(UploadF32(&d.bqkv, PartOf(b), stream));
    }
    if (c.o_bias || src.Has(ap + "o_proj.bias")) RETURN_IF_ERROR(up.F32(&d.bo, ap + "o_proj.bias", Hd));
    if (c.qk_norm == QkNorm::kPerHead) {
      RETURN_IF_ERROR(up.F32(&d.q_norm, ap + "q_norm.weight", hd));
      RETURN_IF_ERROR(up.F32(&d.k_norm, ap + "k_norm.weight", hd));
    } else if (c.qk_norm == QkNorm::kFull) {
      RETURN_IF_ERROR(up.F32(&d.q_norm, ap + "q_norm.weight", H * hd));
      RETURN_IF_ERROR(up.F32(&d.k_norm, ap + "k_norm.weight", KV * hd));
    }
    }
    if (!c.moe_layer[l]) {
      const std::string p = lp + "mlp.";
      RETURN_IF_ERROR(up.Bf16(&d.s13, {{p + "gate_proj.weight", {Id, Hd}}, {p + "up_proj.weight", {Id, Hd}}}));
      RETURN_IF_ERROR(up.Bf16(&d.s2, {{p + "down_proj.weight", {Hd, Id}}}));
      src.Release();
      continue;
    }
    // Mixtral's original checkpoints call the block `block_sparse_moe` and its experts' matrices
    // w1 (gate), w3 (up) and w2 (down).
    const std::string p = src.Has(lp + "block_sparse_moe.gate.weight") ? lp + "block_sparse_moe." : lp + "mlp.";
    const bool w_names = src.Has(p + "experts.0.w1.weight");
    RETURN_IF_ERROR(up.Bf16(&d.router, {{p + "gate.weight", {E, Hd}}}));
    if (c.router == Router::kSigmoidGrouped) RETURN_IF_ERROR(up.F32(&d.score_bias, p + "gate.e_score_correction_bias", E));
    if (src.Has(p + "experts.gate_up_proj") || (!src.Has(p + "experts.0.gate_proj.weight") && !w_names)) {
      RETURN_IF_ERROR(up.Bf16(&d.w13, {{p + "experts.gate_up_proj", {E, 2 * I, Hd}}}));
      RETURN_IF_ERROR(up.Bf16(&d.w2, {{p + "experts.down_proj", {E, Hd, I}}}));
    } else {
      std::vector<std::pair<std::string, std::vector<int64_t>>> w13, w2;
      for (int64_t e = 0; e < E; ++e) {
        const std::string q = absl::StrCat(p, "experts.", e, ".");
        w13.push_back({q + (w_names ? "w1" : "gate_proj") + ".weight", {I, Hd}});
        w13.push_back({q + (w_names ? "w3" : "up_proj") + ".weight", {I, Hd}});
        w2.push_back({q + (w_names ? "w2" : "down_proj") + ".weight", {Hd, I}});
      }
      RETURN_IF_ERROR(up.Bf16(&d.w13, w13));
      RETURN_IF_ERROR(up.Bf16(&d.w2, w2));
    }
    if (c.shared_intermediate_size > 0) {  // qwen2_moe's one shared expert, DeepSeek-V3's as one MLP
      const int64_t Is = c.shared_intermediate_size;
      const std::string sp = p + (c.family == HfFamily::kQwen2Moe ? "shared_expert." : "shared_experts.");
      RETURN_IF_ERROR(up.Bf16(&d.s13, {{sp + "gate_proj.weight", {Is, Hd}}, {sp + "up_proj.weight", {Is, Hd}}}));
      RETURN_IF_ERROR(up.Bf16(&d.s2, {{sp + "down_proj.weight", {Hd, Is}}}));
      if (c.shared_expert_gate) RETURN_IF_ERROR(up.Bf16(&d.shared_gate, {{p + "shared_expert_gate.weight", {1, Hd}}}));
    }
    src.Release();
  }
  return absl::OkStatus();
}

}  // namespace flotilla::inference::cuda
