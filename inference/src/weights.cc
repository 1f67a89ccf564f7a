#include "weights.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/safetensors.h"
#include "parallel_chunks.h"

namespace flotilla::inference {

std::vector<TensorSlot> TensorSlots(ModelWeights& w) {
  const ModelConfig& c = w.config;
  const int64_t D = c.d_model, hd = c.head_dim, H = c.n_heads, KV = c.n_kv_heads;
  const int64_t E = c.n_experts, F = c.expert_hidden, S = c.n_shared_experts, V = c.vocab_size;
  w.layers.resize(static_cast<size_t>(c.n_layers));
  std::vector<TensorSlot> s;
  s.push_back({"embed.weight", {V, D}, &w.embed});
  s.push_back({"norm.weight", {D}, &w.norm});
  if (!c.tie_embeddings) s.push_back({"lm_head.weight", {V, D}, &w.lm_head});
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& L = w.layers[l];
    std::string p = absl::StrCat("layers.", l, ".");
    s.push_back({p + "attn_norm.weight", {D}, &L.attn_norm});
    s.push_back({p + "attn.wq", {H * hd, D}, &L.wq});
    s.push_back({p + "attn.wk", {KV * hd, D}, &L.wk});
    s.push_back({p + "attn.wv", {KV * hd, D}, &L.wv});
    s.push_back({p + "attn.wo", {D, H * hd}, &L.wo});
    s.push_back({p + "ffn_norm.weight", {D}, &L.ffn_norm});
    s.push_back({p + "moe.router", {E, D}, &L.router});
    s.push_back({p + "moe.experts.w1", {E, F, D}, &L.w1});
    s.push_back({p + "moe.experts.w3", {E, F, D}, &L.w3});
    s.push_back({p + "moe.experts.w2", {E, D, F}, &L.w2});
    if (S > 0) {
      s.push_back({p + "moe.shared.w1", {S, F, D}, &L.s1});
      s.push_back({p + "moe.shared.w3", {S, F, D}, &L.s3});
      s.push_back({p + "moe.shared.w2", {S, D, F}, &L.s2});
    }
  }
  return s;
}

namespace {
std::string ShapeText(const std::vector<int64_t>& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }
}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> OpenCheckedWeights(const ModelConfig& config,
                                                                    const std::string& path) {
  RETURN_IF_ERROR(config.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
  ModelWeights shapes;  // only for the names and shapes of its slots
  shapes.config = config;
  std::vector<TensorSlot> slots = TensorSlots(shapes);
  std::set<std::string> expected;
  for (const TensorSlot& slot : slots) expected.insert(slot.name);
  for (const auto& [name, t] : file->tensors()) {
    if (!expected.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": unexpected tensor '", name, "' (file does not match the model config)"));
    }
  }
  for (const TensorSlot& slot : slots) {
    auto it = file->tensors().find(slot.name);
    if (it == file->tensors().end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": missing tensor '", slot.name, "'"));
    }
    const TensorView& t = it->second;
    if (t.dtype != DType::kF32 && t.dtype != DType::kBF16) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", slot.name, "' has dtype ",
                                                     DTypeName(t.dtype), ", Flotilla's format wants F32 or BF16"));
    }
    if (t.shape != slot.shape) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", slot.name, "' has shape ",
                                                     ShapeText(t.shape), ", config wants ",
                                                     ShapeText(slot.shape)));
    }
    // Checked on several threads from the raw bytes: a swap of a large model waits on this.
    const size_t n = static_cast<size_t>(t.numel());
    std::atomic<size_t> first_bad{n};
    ForChunks(n, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        bool finite;
        if (t.dtype == DType::kF32) {
          uint32_t u;
          std::memcpy(&u, t.data + 4 * i, 4);
          finite = (u & 0x7f800000u) != 0x7f800000u;
        } else {
          uint16_t b;
          std::memcpy(&b, t.data + 2 * i, 2);
          finite = (b & 0x7f80u) != 0x7f80u;
        }
        if (!finite) {
          size_t seen = first_bad.load();
          while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
          }
          break;
        }
      }
    });
    if (first_bad.load() < n) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", slot.name, "' has a non-finite value at index ", first_bad.load()));
    }
  }
  return file;
}

absl::StatusOr<std::shared_ptr<const ModelWeights>> ModelWeights::Load(const ModelConfig& config,
                                                                      const std::string& path,
                                                                      int64_t version) {
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, OpenCheckedWeights(config, path));
  auto w = std::make_shared<ModelWeights>();
  w->config = config;
  w->version = version;
  w->source = path;
  for (const TensorSlot& slot : TensorSlots(*w)) {
    const TensorView& t = file->tensors().at(slot.name);
    const size_t n = static_cast<size_t>(t.numel());
    slot.dst->resize(n);
    // Widened on several threads.
    ForChunks(n, [&](size_t begin, size_t end) {
      float* dst = slot.dst->data();
      if (t.dtype == DType::kF32) {
        std::memcpy(dst + begin, t.data + 4 * begin, (end - begin) * 4);
      } else {
        for (size_t i = begin; i < end; ++i) {
          uint16_t b;
          std::memcpy(&b, t.data + 2 * i, 2);
          dst[i] = Bf16ToF32(b);
        }
      }
    });
  }
  return std::shared_ptr<const ModelWeights>(std::move(w));
}

std::shared_ptr<const ModelWeights> ModelWeights::Random(const ModelConfig& config, uint64_t seed,
                                                         float stddev, int64_t version) {
  auto w = std::make_shared<ModelWeights>();
  w->config = config;
  w->version = version;
  w->source = absl::StrCat("random:", seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const TensorSlot& slot : TensorSlots(*w)) {
    int64_t n = 1;
    for (int64_t d : slot.shape) n *= d;
    slot.dst->resize(static_cast<size_t>(n));
    bool is_norm = slot.name.find("norm") != std::string::npos;
    for (float& x : *slot.dst) x = is_norm ? 1.0f + 0.1f * normal(rng) : stddev * normal(rng);
  }
  return w;
}

}  // namespace flotilla::inference
