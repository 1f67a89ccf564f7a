#include "flotilla/inference/model_config.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference {
namespace {

using nlohmann::json;

absl::Status ReadInt(const json& j, const char* key, int32_t* out) {
  if (!j.contains(key)) return absl::OkStatus();
  const json& v = j.at(key);
  if (!v.is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat("model config: field '", key, "' must be an integer"));
  }
  int64_t x = v.get<int64_t>();
  if (x < INT32_MIN || x > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("model config: field '", key, "' out of range"));
  }
  *out = static_cast<int32_t>(x);
  return absl::OkStatus();
}

absl::Status ReadFloat(const json& j, const char* key, float* out) {
  if (!j.contains(key)) return absl::OkStatus();
  if (!j.at(key).is_number()) {
    return absl::InvalidArgumentError(absl::StrCat("model config: field '", key, "' must be a number"));
  }
  *out = j.at(key).get<float>();
  return absl::OkStatus();
}

}  // namespace

uint64_t ModelConfig::parameter_count() const {
  uint64_t D = d_model, hd = head_dim, F = expert_hidden;
  uint64_t attn = D * hd * (2ull * n_heads + 2ull * n_kv_heads);
  uint64_t moe = D * n_experts + 3ull * D * F * (n_experts + n_shared_experts);
  uint64_t per_layer = attn + moe + 2 * D;
  uint64_t embed = uint64_t(vocab_size) * D * (tie_embeddings ? 1 : 2);
  return embed + D + per_layer * n_layers;
}

absl::StatusOr<ModelConfig> ModelConfig::FromJson(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("model config: not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("model config: expected a JSON object");
  static const std::set<std::string> kKnown = {
      "vocab_size", "n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "rope_theta",
      "norm_eps", "n_experts", "top_k", "n_shared_experts", "expert_hidden", "max_context",
      "sliding_window", "sliding_layers", "tie_embeddings"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!kKnown.count(it.key())) {
      return absl::InvalidArgumentError(absl::StrCat("model config: unknown field '", it.key(), "'"));
    }
  }
  ModelConfig c;
  struct IntField { const char* key; int32_t* dst; };
  for (IntField f : {IntField{"vocab_size", &c.vocab_size}, {"n_layers", &c.n_layers},
                     {"d_model", &c.d_model}, {"n_heads", &c.n_heads},
                     {"n_kv_heads", &c.n_kv_heads}, {"head_dim", &c.head_dim},
                     {"n_experts", &c.n_experts}, {"top_k", &c.top_k},
                     {"n_shared_experts", &c.n_shared_experts}, {"expert_hidden", &c.expert_hidden},
                     {"max_context", &c.max_context}, {"sliding_window", &c.sliding_window}}) {
    if (auto s = ReadInt(j, f.key, f.dst); !s.ok()) return s;
  }
  if (auto s = ReadFloat(j, "rope_theta", &c.rope_theta); !s.ok()) return s;
  if (auto s = ReadFloat(j, "norm_eps", &c.norm_eps); !s.ok()) return s;
  if (j.contains("sliding_layers")) {
    const json& v = j.at("sliding_layers");
    if (!v.is_array()) return absl::InvalidArgumentError("model config: field 'sliding_layers' must be an array");
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number_integer()) {
        return absl::InvalidArgumentError(absl::StrCat("model config: sliding_layers[", i, "] must be an integer"));
      }
      c.sliding_layers.push_back(v[i].get<int32_t>());
    }
  }
  if (j.contains("tie_embeddings")) {
    if (!j.at("tie_embeddings").is_boolean()) {
      return absl::InvalidArgumentError("model config: field 'tie_embeddings' must be a boolean");
    }
    c.tie_embeddings = j.at("tie_embeddings").get<bool>();
  }
  if (auto s = c.Validate(); !s.ok()) return s;
  return c;
}

std::string ModelConfig::ToJson() const {
  json j = {{"vocab_size", vocab_size}, {"n_layers", n_layers}, {"d_model", d_model},
            {"n_heads", n_heads}, {"n_kv_heads", n_kv_heads}, {"head_dim", head_dim},
            {"rope_theta", rope_theta}, {"norm_eps", norm_eps}, {"n_experts", n_experts},
            {"top_k", top_k}, {"n_shared_experts", n_shared_experts},
            {"expert_hidden", expert_hidden}, {"max_context", max_context},
            {"sliding_window", sliding_window}, {"sliding_layers", sliding_layers},
            {"tie_embeddings", tie_embeddings}};
  return j.dump(1);
}

absl::Status ModelConfig::Validate() const {
  auto bad = [](std::string_view field, std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("model config: field '", std::string(field), "' ", std::string(why)));
  };
  if (vocab_size <= 0) return bad("vocab_size", "must be > 0");
  if (n_layers <= 0) return bad("n_layers", "must be > 0");
  if (d_model <= 0) return bad("d_model", "must be > 0");
  if (n_heads <= 0) return bad("n_heads", "must be > 0");
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0) return bad("n_kv_heads", "must divide n_heads");
  if (head_dim <= 0 || head_dim % 2 != 0) return bad("head_dim", "must be a positive even number");
  if (!(rope_theta > 0)) return bad("rope_theta", "must be > 0");
  if (!(norm_eps > 0)) return bad("norm_eps", "must be > 0");
  if (n_experts <= 0) return bad("n_experts", "must be > 0");
  if (top_k <= 0 || top_k > n_experts) return bad("top_k", "must be in [1, n_experts]");
  if (n_shared_experts < 0) return bad("n_shared_experts", "must be >= 0");
  if (expert_hidden <= 0) return bad("expert_hidden", "must be > 0");
  if (max_context <= 0) return bad("max_context", "must be > 0");
  if (sliding_window < 0) return bad("sliding_window", "must be >= 0");
  if (!sliding_layers.empty() && sliding_window == 0) {
    return bad("sliding_window", "must be > 0 when sliding_layers is set");
  }
  for (int32_t l : sliding_layers) {
    if (l < 0 || l >= n_layers) return bad("sliding_layers", absl::StrCat("has layer ", l, " outside [0, n_layers)"));
  }
  return absl::OkStatus();
}

}  // namespace flotilla::inference
