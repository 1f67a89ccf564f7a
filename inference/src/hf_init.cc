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
#include "hf/init_tensors.h"
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

constexpr std::pair<const char*, const char*> kFamilies[] = {
    {"qwen3_moe", "Qwen3MoeForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},       {"llama", "LlamaForCausalLM"},
    {"mixtral", "MixtralForCausalLM"},    {"olmoe", "OlmoeForCausalLM"},       {"qwen2_moe", "Qwen2MoeForCausalLM"},
    {"deepseek_v3", "DeepseekV3ForCausalLM"}};

absl::Status CheckShape(const HfInitOptions& o, bool moe) {
  if (o.hidden_size <= 0 || o.num_layers <= 0 || o.num_heads <= 0 || o.num_kv_heads <= 0 || o.head_dim <= 0 ||
      o.num_heads % o.num_kv_heads != 0) {
    return absl::InvalidArgumentError("model shape: sizes must be positive and num_heads a multiple of num_kv_heads");
  }
  for (int32_t l : o.mlp_only_layers) {
    if (l < 0 || l >= o.num_layers) {
      return absl::InvalidArgumentError(absl::StrCat("mlp_only_layers: layer ", l, " is not in [0, ", o.num_layers, ")"));
    }
  }
  if (moe && (o.num_experts <= 0 || o.top_k <= 0 || o.top_k > o.num_experts)) {
    return absl::InvalidArgumentError("model shape: top_k must be in [1, num_experts]");
  }
  if (o.family == "deepseek_v3") {
    if (o.kv_lora_rank <= 0 || o.q_lora_rank < 0 || o.qk_nope_head_dim <= 0 || o.v_head_dim <= 0 ||
        o.qk_rope_head_dim <= 0 || o.qk_rope_head_dim % 2 != 0) {
      return absl::InvalidArgumentError(
          "deepseek_v3 shape: kv_lora_rank, qk_nope_head_dim, v_head_dim > 0, q_lora_rank >= 0, qk_rope_head_dim even");
    }
    if (o.n_group <= 0 || o.num_experts % o.n_group != 0 || o.topk_group <= 0 || o.topk_group > o.n_group) {
      return absl::InvalidArgumentError("deepseek_v3 routing: n_group must divide num_experts, topk_group in [1, n_group]");
    }
  }
  return absl::OkStatus();
}

// config.json's fields for the options' family, as transformers names them.
absl::StatusOr<nlohmann::ordered_json> Config(const HfInitOptions& o, const char* architecture, int64_t vocab,
                                              std::optional<int32_t> eos) {
  const nlohmann::ordered_json rope = nlohmann::ordered_json::parse(o.rope_parameters, nullptr, false);
  if (!rope.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("--rope: '", o.rope_parameters, "' is not a JSON object"));
  }
  const std::string& f = o.family;
  const bool deepseek = f == "deepseek_v3";
  nlohmann::ordered_json c;
  c["architectures"] = {architecture};
  c["model_type"] = f;
  c["vocab_size"] = vocab;
  c["hidden_size"] = o.hidden_size;
  c["num_hidden_layers"] = o.num_layers;
  c["num_attention_heads"] = o.num_heads;
  c["num_key_value_heads"] = deepseek ? o.num_heads : o.num_kv_heads;
  c["head_dim"] = o.head_dim;
  c["intermediate_size"] = o.intermediate_size;
  c["hidden_act"] = "silu";
  c["rms_norm_eps"] = o.rms_norm_eps;
  c["max_position_embeddings"] = o.max_position_embeddings;
  c["rope_parameters"] = rope;
  c["attention_bias"] = o.attention_bias;
  c["tie_word_embeddings"] = o.tie_word_embeddings;
  if (f != "llama" && f != "qwen3") {
    c[deepseek ? "n_routed_experts" : f == "mixtral" ? "num_local_experts" : "num_experts"] = o.num_experts;
    c["num_experts_per_tok"] = o.top_k;
  }
  if (f != "llama" && f != "qwen3" && f != "mixtral") c["norm_topk_prob"] = o.norm_topk_prob;
  if (f == "qwen3_moe" || f == "qwen2_moe" || deepseek) c["moe_intermediate_size"] = o.moe_intermediate_size;
  if (f == "qwen3_moe" || f == "qwen2_moe") {
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = o.mlp_only_layers;
  }
  if (f == "qwen2_moe") {
    c["shared_expert_intermediate_size"] = o.shared_expert_intermediate_size;
    c["use_sliding_window"] = false;
  }
  if (f == "mixtral") {
    c["sliding_window"] = o.sliding_window > 0 ? nlohmann::ordered_json(o.sliding_window) : nlohmann::ordered_json(nullptr);
  }
  if (deepseek) {
    c["q_lora_rank"] = o.q_lora_rank > 0 ? nlohmann::ordered_json(o.q_lora_rank) : nlohmann::ordered_json(nullptr);
    c["kv_lora_rank"] = o.kv_lora_rank;
    c["qk_rope_head_dim"] = o.qk_rope_head_dim;
    c["qk_nope_head_dim"] = o.qk_nope_head_dim;
    c["v_head_dim"] = o.v_head_dim;
    c["rope_interleave"] = o.rope_interleave;
    c["n_shared_experts"] = o.n_shared_experts;
    c["n_group"] = o.n_group;
    c["topk_group"] = o.topk_group;
    c["routed_scaling_factor"] = o.routed_scaling_factor;
    c["first_k_dense_replace"] = o.first_k_dense_replace;
    c["topk_method"] = "noaux_tc";
    c["scoring_func"] = "sigmoid";
  }
  c["bos_token_id"] = nullptr;
  c["eos_token_id"] = eos.has_value() ? nlohmann::ordered_json(*eos) : nlohmann::ordered_json(nullptr);
  c["dtype"] = o.dtype == DType::kBF16 ? "bfloat16" : "float32";
  return c;
}

}  // namespace

absl::Status WriteRandomHfModel(const HfInitOptions& o) {
  const char* architecture = nullptr;
  for (const auto& [family, arch] : kFamilies) {
    if (o.family == family) architecture = arch;
  }
  if (architecture == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--family: '", o.family, "' is not supported (qwen3_moe, qwen3, llama, mixtral, olmoe, qwen2_moe, deepseek_v3)"));
  }
  RETURN_IF_ERROR(CheckShape(o, o.family != "llama" && o.family != "qwen3"));
  if (o.tie_word_embeddings && o.end_probability > 0) {
    return absl::InvalidArgumentError("--end-probability: needs an lm_head of its own (tie_word_embeddings false)");
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
  const std::optional<int32_t> eos = tok != nullptr ? tok->eos_id() : std::nullopt;
  ASSIGN_OR_RETURN(const nlohmann::ordered_json c, Config(o, architecture, vocab, eos));
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

  const fs::path out(o.out_dir);
  RETURN_IF_ERROR(WriteJson(out / "config.json", c));
  nlohmann::ordered_json g;
  g["eos_token_id"] = c["eos_token_id"];
  RETURN_IF_ERROR(WriteJson(out / "generation_config.json", g));

  RandomTensors t(o.seed, o.dtype);
  DrawHfTensors(o, vocab, t);
  if (o.end_probability > 0) {
    if (!eos.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("--end-probability: the tokenizer in '", o.tokenizer_dir,
                                                     "' names no end token (tokenizer_config.json eos_token)"));
    }
    RaiseEndToken(t, vocab, o.hidden_size, o.init_std, *eos, o.end_probability);
  }
  return t.Write((out / "model.safetensors").string());
}

}  // namespace flotilla::inference
