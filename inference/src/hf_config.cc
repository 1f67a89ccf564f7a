#include "flotilla/inference/hf_config.h"

#include <cmath>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference {
namespace {

using nlohmann::json;

// Reads fields of one JSON object; every error names the file and the field.
class Fields {
 public:
  Fields(const json& j, std::string source, std::string prefix = "")
      : j_(j), source_(std::move(source)), prefix_(std::move(prefix)) {}

  absl::Status Bad(std::string_view key, std::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": field '", prefix_, std::string(key), "' ", std::string(why)));
  }
  bool Has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  absl::Status Int(const char* key, int32_t* out, bool required) const {
    if (!Has(key)) return required ? Bad(key, "is required") : absl::OkStatus();
    const json& v = j_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
      return Bad(key, "must be a non-negative integer");
    }
    *out = static_cast<int32_t>(v.get<int64_t>());
    return absl::OkStatus();
  }
  // The first of `keys` present (a field and its alias: transformers 5 writes
  // num_local_experts where older versions wrote num_experts); required names the first.
  absl::Status IntAlias(std::initializer_list<const char*> keys, int32_t* out) const {
    for (const char* k : keys) {
      if (Has(k)) return Int(k, out, true);
    }
    return Bad(*keys.begin(), "is required");
  }
  absl::Status Num(const char* key, double* out, bool required) const {
    if (!Has(key)) return required ? Bad(key, "is required") : absl::OkStatus();
    if (!j_.at(key).is_number()) return Bad(key, "must be a number");
    *out = j_.at(key).get<double>();
    return absl::OkStatus();
  }
  absl::Status Float(const char* key, float* out, bool required) const {
    double d = *out;
    RETURN_IF_ERROR(Num(key, &d, required));
    *out = static_cast<float>(d);
    return absl::OkStatus();
  }
  absl::Status Bool(const char* key, bool* out) const {
    if (!Has(key)) return absl::OkStatus();
    if (!j_.at(key).is_boolean()) return Bad(key, "must be true or false");
    *out = j_.at(key).get<bool>();
    return absl::OkStatus();
  }
  absl::Status Str(const char* key, std::string* out) const {
    if (!Has(key)) return absl::OkStatus();
    if (!j_.at(key).is_string()) return Bad(key, "must be a string");
    *out = j_.at(key).get<std::string>();
    return absl::OkStatus();
  }
  absl::Status IntList(const char* key, std::vector<int32_t>* out) const {
    if (!Has(key)) return absl::OkStatus();
    const json& v = j_.at(key);
    if (!v.is_array()) return Bad(key, "must be an array of integers");
    for (const json& x : v) {
      if (!x.is_number_integer()) return Bad(key, "must be an array of integers");
      out->push_back(x.get<int32_t>());
    }
    return absl::OkStatus();
  }

 private:
  const json& j_;
  std::string source_;
  std::string prefix_;
};

absl::Status ParseRope(const json& j, const Fields& top, const std::string& source, HfConfig* c) {
  HfRope& r = c->rope;
  RETURN_IF_ERROR(top.Num("rope_theta", &r.theta, false));
  double top_partial = 1.0;
  RETURN_IF_ERROR(top.Num("partial_rotary_factor", &top_partial, false));
  if (top_partial != 1.0) return top.Bad("partial_rotary_factor", "other than 1 is not supported");
  const char* key = top.Has("rope_parameters") ? "rope_parameters" : top.Has("rope_scaling") ? "rope_scaling" : nullptr;
  if (key == nullptr) return absl::OkStatus();
  const json& p = j.at(key);
  if (!p.is_object()) return top.Bad(key, "must be an object");
  Fields f(p, source, absl::StrCat(key, "."));
  RETURN_IF_ERROR(f.Num("rope_theta", &r.theta, false));
  if (f.Has("type")) RETURN_IF_ERROR(f.Str("type", &r.type));
  RETURN_IF_ERROR(f.Str("rope_type", &r.type));
  if (r.type != "default" && r.type != "linear" && r.type != "llama3" && r.type != "yarn") {
    return f.Bad("rope_type", absl::StrCat("'", r.type, "' is not supported (default, linear, llama3, yarn)"));
  }
  const bool scaled = r.type != "default";
  double partial = 1.0;
  RETURN_IF_ERROR(f.Num("partial_rotary_factor", &partial, false));
  if (partial != 1.0) return f.Bad("partial_rotary_factor", "other than 1 is not supported");
  // yarn may leave factor out: max_position_embeddings / original_max_position_embeddings.
  if (r.type == "yarn") r.factor = 0;
  RETURN_IF_ERROR(f.Num("factor", &r.factor, scaled && r.type != "yarn"));
  RETURN_IF_ERROR(f.Num("original_max_position_embeddings", &r.original_max_position, r.type == "llama3"));
  RETURN_IF_ERROR(f.Num("low_freq_factor", &r.low_freq_factor, r.type == "llama3"));
  RETURN_IF_ERROR(f.Num("high_freq_factor", &r.high_freq_factor, r.type == "llama3"));
  RETURN_IF_ERROR(f.Num("beta_fast", &r.beta_fast, false));
  RETURN_IF_ERROR(f.Num("beta_slow", &r.beta_slow, false));
  RETURN_IF_ERROR(f.Num("mscale", &r.mscale, false));
  RETURN_IF_ERROR(f.Num("mscale_all_dim", &r.mscale_all_dim, false));
  RETURN_IF_ERROR(f.Num("attention_factor", &r.attention_factor, false));
  RETURN_IF_ERROR(f.Bool("truncate", &r.truncate));
  if ((scaled && r.type != "yarn" && !(r.factor > 0)) || r.factor < 0) return f.Bad("factor", "must be > 0");
  if (!(r.theta > 0)) return top.Bad("rope_theta", "must be > 0");
  return absl::OkStatus();
}

// Layer l routes when it is not in mlp_only_layers and (l + 1) is a multiple of the step.
absl::Status QwenMoeLayers(const Fields& f, HfConfig* c) {
  std::vector<int32_t> mlp_only;
  int32_t step = 1;
  RETURN_IF_ERROR(f.IntList("mlp_only_layers", &mlp_only));
  RETURN_IF_ERROR(f.Int("decoder_sparse_step", &step, false));
  if (step <= 0) return f.Bad("decoder_sparse_step", "must be > 0");
  std::set<int32_t> dense(mlp_only.begin(), mlp_only.end());
  for (int l = 0; l < c->num_layers; ++l) {
    c->moe_layer[l] = !dense.count(l) && c->num_experts > 0 && (l + 1) % step == 0;
  }
  return absl::OkStatus();
}

}  // namespace

int32_t HfConfig::num_moe_layers() const {
  int32_t n = 0;
  for (bool m : moe_layer) n += m;
  return n;
}

absl::StatusOr<HfConfig> HfConfig::FromJson(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  Fields f(j, source);
  HfConfig c;
  if (!f.Has("model_type")) return f.Bad("model_type", "is required");
  RETURN_IF_ERROR(f.Str("model_type", &c.model_type));
  static const std::pair<const char*, HfFamily> kFamilies[] = {
      {"llama", HfFamily::kLlama},         {"qwen3", HfFamily::kQwen3},   {"qwen3_moe", HfFamily::kQwen3Moe},
      {"qwen2_moe", HfFamily::kQwen2Moe},  {"mixtral", HfFamily::kMixtral}, {"olmoe", HfFamily::kOlmoe},
      {"deepseek_v3", HfFamily::kDeepseekV3}};
  bool known = false;
  for (const auto& [name, fam] : kFamilies) {
    if (c.model_type == name) c.family = fam, known = true;
  }
  if (!known) {
    return f.Bad("model_type", absl::StrCat("'", c.model_type, "' is not supported (llama, qwen3, qwen3_moe, "
                                            "qwen2_moe, mixtral, olmoe, deepseek_v3)"));
  }
  RETURN_IF_ERROR(f.Int("vocab_size", &c.vocab_size, true));
  RETURN_IF_ERROR(f.Int("hidden_size", &c.hidden_size, true));
  RETURN_IF_ERROR(f.Int("num_hidden_layers", &c.num_layers, true));
  RETURN_IF_ERROR(f.Int("num_attention_heads", &c.num_heads, true));
  c.num_kv_heads = c.num_heads;
  RETURN_IF_ERROR(f.Int("num_key_value_heads", &c.num_kv_heads, false));
  RETURN_IF_ERROR(f.Int("intermediate_size", &c.intermediate_size, true));
  RETURN_IF_ERROR(f.Float("rms_norm_eps", &c.rms_norm_eps, true));
  RETURN_IF_ERROR(f.Int("max_position_embeddings", &c.max_position_embeddings, true));
  RETURN_IF_ERROR(f.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  if (c.vocab_size == 0) return f.Bad("vocab_size", "must be > 0");
  if (c.hidden_size == 0) return f.Bad("hidden_size", "must be > 0");
  if (c.num_layers == 0) return f.Bad("num_hidden_layers", "must be > 0");
  if (c.num_heads == 0) return f.Bad("num_attention_heads", "must be > 0");
  if (c.num_kv_heads == 0 || c.num_heads % c.num_kv_heads != 0) {
    return f.Bad("num_key_value_heads", "must divide num_attention_heads");
  }
  if (c.max_position_embeddings == 0) return f.Bad("max_position_embeddings", "must be > 0");
  c.head_dim = c.hidden_size / c.num_heads;
  RETURN_IF_ERROR(f.Int("head_dim", &c.head_dim, false));
  std::string act = "silu";
  RETURN_IF_ERROR(f.Str("hidden_act", &act));
  if (act != "silu") return f.Bad("hidden_act", absl::StrCat("'", act, "' is not supported (silu)"));
  bool attention_bias = false;
  RETURN_IF_ERROR(f.Bool("attention_bias", &attention_bias));
  c.moe_layer.assign(c.num_layers, false);
  RETURN_IF_ERROR(ParseRope(j, f, source, &c));

  bool sliding = false;
  RETURN_IF_ERROR(f.Bool("use_sliding_window", &sliding));
  if (sliding) return f.Bad("use_sliding_window", "true is not supported");
  switch (c.family) {
    case HfFamily::kLlama: {
      bool mlp_bias = false;
      RETURN_IF_ERROR(f.Bool("mlp_bias", &mlp_bias));
      if (mlp_bias) return f.Bad("mlp_bias", "true is not supported");
      c.qkv_bias = c.o_bias = attention_bias;
      break;
    }
    case HfFamily::kQwen3:
    case HfFamily::kQwen3Moe:
    case HfFamily::kQwen2Moe:
      if (c.family == HfFamily::kQwen2Moe) {
        c.qkv_bias = true;
      } else {
        c.qk_norm = QkNorm::kPerHead;
        c.qkv_bias = c.o_bias = attention_bias;
      }
      if (c.family != HfFamily::kQwen3) {
        RETURN_IF_ERROR(f.IntAlias({"num_experts", "num_local_experts"}, &c.num_experts));
        RETURN_IF_ERROR(f.Int("num_experts_per_tok", &c.top_k, true));
        RETURN_IF_ERROR(f.Int("moe_intermediate_size", &c.moe_intermediate_size, true));
        RETURN_IF_ERROR(f.Bool("norm_topk_prob", &c.norm_topk_prob));
        RETURN_IF_ERROR(QwenMoeLayers(f, &c));
      }
      if (c.family == HfFamily::kQwen2Moe) {
        RETURN_IF_ERROR(f.Int("shared_expert_intermediate_size", &c.shared_intermediate_size, true));
        c.shared_expert_gate = c.shared_intermediate_size > 0;
      }
      break;
    case HfFamily::kMixtral:
      RETURN_IF_ERROR(f.IntAlias({"num_local_experts", "num_experts"}, &c.num_experts));
      RETURN_IF_ERROR(f.Int("num_experts_per_tok", &c.top_k, true));
      RETURN_IF_ERROR(f.Int("sliding_window", &c.sliding_window, false));
      c.moe_intermediate_size = c.intermediate_size;
      c.norm_topk_prob = true;
      c.moe_layer.assign(c.num_layers, true);
      break;
    case HfFamily::kOlmoe:
      if (f.Has("clip_qkv")) return f.Bad("clip_qkv", "is not supported (must be null)");
      RETURN_IF_ERROR(f.IntAlias({"num_experts", "num_local_experts"}, &c.num_experts));
      RETURN_IF_ERROR(f.Int("num_experts_per_tok", &c.top_k, true));
      RETURN_IF_ERROR(f.Bool("norm_topk_prob", &c.norm_topk_prob));
      c.moe_intermediate_size = c.intermediate_size;
      c.qk_norm = QkNorm::kFull;
      c.qkv_bias = c.o_bias = attention_bias;
      c.moe_layer.assign(c.num_layers, true);
      break;
    case HfFamily::kDeepseekV3: {
      c.mla = true;
      c.rope_interleave = true;
      c.qkv_bias = attention_bias;
      RETURN_IF_ERROR(f.Bool("rope_interleave", &c.rope_interleave));
      RETURN_IF_ERROR(f.Int("q_lora_rank", &c.q_lora_rank, false));
      RETURN_IF_ERROR(f.Int("kv_lora_rank", &c.kv_lora_rank, true));
      RETURN_IF_ERROR(f.Int("qk_rope_head_dim", &c.qk_rope_head_dim, true));
      RETURN_IF_ERROR(f.Int("qk_nope_head_dim", &c.qk_nope_head_dim, true));
      RETURN_IF_ERROR(f.Int("v_head_dim", &c.v_head_dim, true));
      RETURN_IF_ERROR(f.IntAlias({"n_routed_experts", "num_local_experts"}, &c.num_experts));
      RETURN_IF_ERROR(f.Int("num_experts_per_tok", &c.top_k, true));
      RETURN_IF_ERROR(f.Int("moe_intermediate_size", &c.moe_intermediate_size, true));
      // Missing fields take transformers' DeepseekV3Config defaults.
      int32_t shared = 1, first_dense = 3;
      c.n_group = 8;
      c.topk_group = 4;
      c.routed_scaling_factor = 2.5f;
      c.norm_topk_prob = true;
      RETURN_IF_ERROR(f.Int("n_shared_experts", &shared, false));
      c.shared_intermediate_size = shared * c.moe_intermediate_size;
      RETURN_IF_ERROR(f.Int("n_group", &c.n_group, false));
      RETURN_IF_ERROR(f.Int("topk_group", &c.topk_group, false));
      RETURN_IF_ERROR(f.Float("routed_scaling_factor", &c.routed_scaling_factor, false));
      RETURN_IF_ERROR(f.Bool("norm_topk_prob", &c.norm_topk_prob));
      RETURN_IF_ERROR(f.Int("first_k_dense_replace", &first_dense, false));
      std::string method = "noaux_tc", scoring = "sigmoid";
      RETURN_IF_ERROR(f.Str("topk_method", &method));
      RETURN_IF_ERROR(f.Str("scoring_func", &scoring));
      if (method != "noaux_tc") return f.Bad("topk_method", absl::StrCat("'", method, "' is not supported (noaux_tc)"));
      if (scoring != "sigmoid") return f.Bad("scoring_func", absl::StrCat("'", scoring, "' is not supported (sigmoid)"));
      if (c.qk_rope_head_dim == 0 || c.qk_rope_head_dim % 2 != 0) return f.Bad("qk_rope_head_dim", "must be even and > 0");
      if (c.n_group == 0 || c.num_experts % c.n_group != 0) return f.Bad("n_group", "must divide n_routed_experts");
      if (c.topk_group == 0 || c.topk_group > c.n_group) return f.Bad("topk_group", "must be in [1, n_group]");
      if (c.num_experts / c.n_group < 2) return f.Bad("n_group", "needs at least 2 experts per group");
      c.router = Router::kSigmoidGrouped;
      c.num_kv_heads = c.num_heads;
      for (int l = 0; l < c.num_layers; ++l) c.moe_layer[l] = c.num_experts > 0 && l >= first_dense;
      break;
    }
  }
  if (!c.mla && (c.head_dim == 0 || c.head_dim % 2 != 0)) return f.Bad("head_dim", "must be even and > 0");
  if (c.num_moe_layers() > 0) {
    if (c.top_k == 0 || c.top_k > c.num_experts) return f.Bad("num_experts_per_tok", "must be in [1, num_experts]");
    if (c.moe_intermediate_size == 0) return f.Bad("moe_intermediate_size", "must be > 0");
  }
  return c;
}

absl::StatusOr<HfConfig> HfConfig::FromDir(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/config.json");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open (a checkpoint folder needs config.json)"));
  std::stringstream ss;
  ss << in.rdbuf();
  return FromJson(ss.str(), path);
}

}  // namespace flotilla::inference
