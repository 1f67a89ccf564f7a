#include "flotilla/inference/hf_init.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/hf_tokenizer.h"
#include "hf/random_tensors.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference {
namespace {

namespace fs = std::filesystem;


absl::Status WriteJson(const fs::path& path, const nlohmann::ordered_json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) return absl::InternalError(absl::StrCat(path.string(), ": cannot write"));
  return absl::OkStatus();
}

// The constant first component of every embedding row, kComponent init_std, dominates the
// residual stream (the layers add outputs of about init_std * sqrt(hidden) per component), so
// after the final RMSNorm (and its weight) it reads close to kComponent / sqrt((kComponent^2 + hidden - 1) /
// hidden) for any context, and the other tokens' logits stay near zero.
void RaiseEndToken(RandomTensors& t, int64_t vocab, int64_t hidden, float init_std, int32_t end, double p) {
  constexpr double kComponent = 50.0;
  std::vector<float>& embed = t.values("model.embed_tokens.weight");
  for (int64_t v = 0; v < vocab; ++v) embed[static_cast<size_t>(v * hidden)] = static_cast<float>(kComponent * init_std);
  const double normed = kComponent / std::sqrt((kComponent * kComponent + static_cast<double>(hidden) - 1) /
                                               static_cast<double>(hidden));
  const double logit = std::log(p / (1 - p) * static_cast<double>(vocab));
  const double norm_weight = t.values("model.norm.weight")[0];
  t.values("lm_head.weight")[static_cast<size_t>(static_cast<int64_t>(end) * hidden)] =
      static_cast<float>(logit / (normed * norm_weight));
}

}  // namespace

absl::Status WriteRandomHfModel(const HfInitOptions& o) {
  const bool moe = o.family == "qwen3_moe";
  if (!moe && o.family != "qwen3") {
    return absl::InvalidArgumentError(absl::StrCat("--family: '", o.family, "' is not supported (qwen3_moe, qwen3)"));
  }
  if (o.hidden_size <= 0 || o.num_layers <= 0 || o.num_heads <= 0 || o.num_kv_heads <= 0 || o.head_dim <= 0 ||
      o.num_heads % o.num_kv_heads != 0) {
    return absl::InvalidArgumentError("model shape: sizes must be positive and num_heads a multiple of num_kv_heads");
  }
  for (int32_t l : o.mlp_only_layers) {
    if (l < 0 || l >= o.num_layers) {
      return absl::InvalidArgumentError(absl::StrCat("mlp_only_layers: layer ", l, " is not in [0, ", o.num_layers, ")"));
    }
  }
  if (o.tie_word_embeddings && o.end_probability > 0) {
    return absl::InvalidArgumentError("--end-probability: needs an lm_head of its own (tie_word_embeddings false)");
  }
  if (moe && (o.num_experts <= 0 || o.top_k <= 0 || o.top_k > o.num_experts)) {
    return absl::InvalidArgumentError("model shape: top_k must be in [1, num_experts]");
  }
  if (o.end_probability < 0 || o.end_probability >= 1) {
    return absl::InvalidArgumentError(absl::StrCat("--end-probability: ", o.end_probability, " is not in [0, 1)"));
  }
  std::unique_ptr<HfTokenizer> tok;
  if (!o.tokenizer_dir.empty()) {
    ASSIGN_OR_RETURN(tok, HfTokenizer::LoadDir(o.tokenizer_dir));
  } else if (o.vocab_size <= 0) {
    return absl::InvalidArgumentError("--vocab-size: required (> 0) without a tokenizer folder");
  }
  if (tok != nullptr && o.vocab_size != 0 && o.vocab_size < tok->vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat("--vocab-size: ", o.vocab_size, " is below the tokenizer's ",
                                                   tok->vocab_size(), " tokens (", o.tokenizer_dir, ")"));
  }
  const int64_t vocab = o.vocab_size != 0 ? o.vocab_size : tok->vocab_size();
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(o.out_dir, ": cannot create (", ec.message(), ")"));
  // The tokenizer files travel with the model.
  const std::vector<fs::directory_entry> tokenizer_files =
      tok != nullptr ? std::vector<fs::directory_entry>(fs::directory_iterator(o.tokenizer_dir), fs::directory_iterator())
                     : std::vector<fs::directory_entry>();
  for (const auto& entry : tokenizer_files) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file()) continue;
    if (name.rfind("tokenizer", 0) != 0 && name != "vocab.json" && name != "merges.txt" &&
        name != "special_tokens_map.json" && name != "chat_template.jinja") {
      continue;
    }
    fs::copy_file(entry.path(), fs::path(o.out_dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(absl::StrCat(entry.path().string(), ": cannot copy (", ec.message(), ")"));
  }

  nlohmann::ordered_json c;
  c["architectures"] = {moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"};
  c["model_type"] = o.family;
  c["vocab_size"] = vocab;
  c["hidden_size"] = o.hidden_size;
  c["num_hidden_layers"] = o.num_layers;
  c["num_attention_heads"] = o.num_heads;
  c["num_key_value_heads"] = o.num_kv_heads;
  c["head_dim"] = o.head_dim;
  c["intermediate_size"] = o.intermediate_size;
  c["hidden_act"] = "silu";
  c["rms_norm_eps"] = 1e-6;
  c["max_position_embeddings"] = o.max_position_embeddings;
  c["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  c["attention_bias"] = false;
  c["tie_word_embeddings"] = o.tie_word_embeddings;
  if (moe) {
    c["num_experts"] = o.num_experts;
    c["num_experts_per_tok"] = o.top_k;
    c["moe_intermediate_size"] = o.moe_intermediate_size;
    c["norm_topk_prob"] = o.norm_topk_prob;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = o.mlp_only_layers;
  }
  auto eos = tok != nullptr ? tok->eos_id() : std::nullopt;
  c["bos_token_id"] = nullptr;
  c["eos_token_id"] = eos.has_value() ? nlohmann::ordered_json(*eos) : nlohmann::ordered_json(nullptr);
  c["dtype"] = o.dtype == DType::kBF16 ? "bfloat16" : "float32";
  const fs::path out(o.out_dir);
  RETURN_IF_ERROR(WriteJson(out / "config.json", c));
  nlohmann::ordered_json g;
  g["eos_token_id"] = c["eos_token_id"];
  RETURN_IF_ERROR(WriteJson(out / "generation_config.json", g));

  RandomTensors t(o.seed, o.dtype);
  const int64_t h = o.hidden_size, hd = o.head_dim;
  const float s = o.init_std;
  t.Normal("model.embed_tokens.weight", {vocab, h}, s);
  if (!o.tie_word_embeddings) t.Normal("lm_head.weight", {vocab, h}, s);
  t.Normal("model.norm.weight", {h}, 0.1f, 1.0f);
  for (int32_t l = 0; l < o.num_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    t.Normal(p + "input_layernorm.weight", {h}, 0.1f, 1.0f);
    t.Normal(p + "post_attention_layernorm.weight", {h}, 0.1f, 1.0f);
    t.Normal(p + "self_attn.q_proj.weight", {o.num_heads * hd, h}, s);
    t.Normal(p + "self_attn.k_proj.weight", {o.num_kv_heads * hd, h}, s);
    t.Normal(p + "self_attn.v_proj.weight", {o.num_kv_heads * hd, h}, s);
    t.Normal(p + "self_attn.o_proj.weight", {h, o.num_heads * hd}, s);
    t.Normal(p + "self_attn.q_norm.weight", {hd}, 0.1f, 1.0f);
    t.Normal(p + "self_attn.k_norm.weight", {hd}, 0.1f, 1.0f);
    if (moe && std::find(o.mlp_only_layers.begin(), o.mlp_only_layers.end(), l) == o.mlp_only_layers.end()) {
      t.Normal(p + "mlp.gate.weight", {o.num_experts, h}, s);
      std::vector<std::string> gate_up, down;
      for (int32_t e = 0; e < o.num_experts; ++e) {
        const std::string q = absl::StrCat(p, "mlp.experts.", e, ".");
        t.Normal(q + "gate_proj.weight", {o.moe_intermediate_size, h}, s);
        t.Normal(q + "up_proj.weight", {o.moe_intermediate_size, h}, s);
        t.Normal(q + "down_proj.weight", {h, o.moe_intermediate_size}, s);
        gate_up.insert(gate_up.end(), {q + "gate_proj.weight", q + "up_proj.weight"});
        down.push_back(q + "down_proj.weight");
      }
      if (o.fused_experts) {
        const int64_t E = o.num_experts, I = o.moe_intermediate_size;
        t.Concat(gate_up, p + "mlp.experts.gate_up_proj", {E, 2 * I, h});
        t.Concat(down, p + "mlp.experts.down_proj", {E, h, I});
      }
    } else {
      t.Normal(p + "mlp.gate_proj.weight", {o.intermediate_size, h}, s);
      t.Normal(p + "mlp.up_proj.weight", {o.intermediate_size, h}, s);
      t.Normal(p + "mlp.down_proj.weight", {h, o.intermediate_size}, s);
    }
  }
  if (o.end_probability > 0) {
    if (!eos.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("--end-probability: the tokenizer in '", o.tokenizer_dir,
                                                     "' names no end token (tokenizer_config.json eos_token)"));
    }
    RaiseEndToken(t, vocab, h, s, *eos, o.end_probability);
  }
  return t.Write((out / "model.safetensors").string());
}

}  // namespace flotilla::inference
