#include "cuda/hf_upload.h"

#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "hf_checkpoint.h"

namespace flotilla::inference::cuda {
namespace {

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

}  // namespace

absl::Status HfCudaSupports(const HfConfig& c) {
  if (c.family != HfFamily::kQwen3Moe && c.family != HfFamily::kQwen3) {
    return absl::UnimplementedError(absl::StrCat("cuda backend: config.json model_type '", c.model_type,
                                                 "' not supported yet (qwen3_moe and qwen3 are; the cpu backend runs it)"));
  }
  if (c.qkv_bias || c.o_bias) {
    return absl::UnimplementedError("cuda backend: config.json attention_bias true is not supported yet");
  }
  if (c.shared_intermediate_size > 0) {
    return absl::UnimplementedError("cuda backend: shared experts of a Hugging Face family are not supported yet");
  }
  if (c.qk_norm == QkNorm::kFull) {
    return absl::UnimplementedError("cuda backend: a q/k norm over the whole projection is not supported yet");
  }
  std::vector<double> inv;
  double factor = 1.0;
  c.RopeTables(&inv, &factor);
  if (factor != 1.0) {
    return absl::UnimplementedError(absl::StrCat("cuda backend: config.json rope_parameters.rope_type '", c.rope.type,
                                                 "' scales attention (factor ", factor, "); not supported yet"));
  }
  if (c.head_dim % 2 != 0) {
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
    RETURN_IF_ERROR(up.Bf16(&d.wqkv, {{ap + "q_proj.weight", {H * hd, Hd}},
                                      {ap + "k_proj.weight", {KV * hd, Hd}},
                                      {ap + "v_proj.weight", {KV * hd, Hd}}}));
    RETURN_IF_ERROR(up.Bf16(&d.wo, {{ap + "o_proj.weight", {Hd, H * hd}}}));
    if (c.qk_norm == QkNorm::kPerHead) {
      RETURN_IF_ERROR(up.F32(&d.q_norm, ap + "q_norm.weight", hd));
      RETURN_IF_ERROR(up.F32(&d.k_norm, ap + "k_norm.weight", hd));
    }
    const std::string p = lp + "mlp.";
    if (!c.moe_layer[l]) {
      RETURN_IF_ERROR(up.Bf16(&d.s13, {{p + "gate_proj.weight", {Id, Hd}}, {p + "up_proj.weight", {Id, Hd}}}));
      RETURN_IF_ERROR(up.Bf16(&d.s2, {{p + "down_proj.weight", {Hd, Id}}}));
      src.Release();
      continue;
    }
    RETURN_IF_ERROR(up.Bf16(&d.router, {{p + "gate.weight", {E, Hd}}}));
    if (src.Has(p + "experts.gate_up_proj") || !src.Has(p + "experts.0.gate_proj.weight")) {
      RETURN_IF_ERROR(up.Bf16(&d.w13, {{p + "experts.gate_up_proj", {E, 2 * I, Hd}}}));
      RETURN_IF_ERROR(up.Bf16(&d.w2, {{p + "experts.down_proj", {E, Hd, I}}}));
    } else {
      std::vector<std::pair<std::string, std::vector<int64_t>>> w13, w2;
      for (int64_t e = 0; e < E; ++e) {
        const std::string q = absl::StrCat(p, "experts.", e, ".");
        w13.push_back({q + "gate_proj.weight", {I, Hd}});
        w13.push_back({q + "up_proj.weight", {I, Hd}});
        w2.push_back({q + "down_proj.weight", {Hd, I}});
      }
      RETURN_IF_ERROR(up.Bf16(&d.w13, w13));
      RETURN_IF_ERROR(up.Bf16(&d.w2, w2));
    }
    src.Release();
  }
  return absl::OkStatus();
}

}  // namespace flotilla::inference::cuda
