// Small random Hugging Face folders (config.json + one model.safetensors) of the families the
// CUDA backend runs beside qwen3_moe (which flotilla's hf_init writes): llama, qwen3 (with any
// rope_parameters, which hf_init does not write), mixtral, olmoe, qwen2_moe and deepseek_v3, with
// the tensor names and config fields transformers uses. Norm weights
// are 1 + normal(0, 0.1) and biases normal(0, 0.1), so neither is at its default; projections
// are drawn large enough that attention and routing are far from uniform. One seed, one folder.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/safetensors.h"
#include "hf/random_tensors.h"
#include "nlohmann/json.hpp"

namespace flotilla::testing {

struct FamilyFolder {
  std::string family;  // llama | qwen3 | mixtral | olmoe | qwen2_moe | deepseek_v3
  int64_t vocab = 4096, hidden = 128, layers = 3, heads = 4, kv_heads = 2, head_dim = 32;
  int64_t intermediate = 160;        // the dense MLP's (and mixtral's / olmoe's experts')
  int64_t experts = 8, top_k = 2, moe_intermediate = 48, shared_intermediate = 96;
  bool attention_bias = false;       // llama, olmoe: q/k/v/o biases (qwen2_moe has q/k/v always)
  bool norm_topk_prob = false;       // olmoe, qwen2_moe
  bool tie_word_embeddings = false;
  bool mixtral_names = true;         // mixtral: block_sparse_moe.experts.N.w1/w3/w2
  std::vector<int32_t> mlp_only_layers;  // qwen2_moe
  int32_t sliding_window = 0;        // mixtral (0: null)
  nlohmann::json rope = {{"rope_theta", 10000.0}, {"rope_type", "default"}};
  // deepseek_v3: latent attention (q_lora_rank 0: q_proj directly), grouped sigmoid routing
  // (moe_intermediate per routed expert, n_shared of that size as one shared MLP), dense layers
  // below first_k_dense.
  int64_t q_lora = 48, kv_lora = 32, rope_dim = 16, nope_dim = 32, v_dim = 24;
  bool rope_interleave = true;
  int64_t n_group = 4, topk_group = 2, n_shared = 1, first_k_dense = 1;
  double routed_scaling_factor = 2.5;
  uint64_t seed = 1;
};

inline absl::Status WriteFamilyFolder(const FamilyFolder& f, const std::string& dir) {
  const bool moe = f.family != "llama" && f.family != "qwen3";
  nlohmann::ordered_json c;
  c["model_type"] = f.family;
  c["vocab_size"] = f.vocab;
  c["hidden_size"] = f.hidden;
  c["num_hidden_layers"] = f.layers;
  c["num_attention_heads"] = f.heads;
  c["num_key_value_heads"] = f.kv_heads;
  c["head_dim"] = f.head_dim;
  c["intermediate_size"] = f.intermediate;
  c["hidden_act"] = "silu";
  c["rms_norm_eps"] = 1e-6;
  c["max_position_embeddings"] = 4096;
  c["rope_parameters"] = f.rope;
  c["attention_bias"] = f.attention_bias;
  c["tie_word_embeddings"] = f.tie_word_embeddings;
  c["dtype"] = "bfloat16";
  if (moe) {
    c["num_experts"] = f.experts;
    c["num_experts_per_tok"] = f.top_k;
  }
  if (f.family == "olmoe" || f.family == "qwen2_moe") c["norm_topk_prob"] = f.norm_topk_prob;
  if (f.family == "qwen2_moe") {
    c["moe_intermediate_size"] = f.moe_intermediate;
    c["shared_expert_intermediate_size"] = f.shared_intermediate;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = f.mlp_only_layers;
    c["use_sliding_window"] = false;
  }
  if (f.family == "deepseek_v3") {
    c["num_key_value_heads"] = f.heads;
    c["q_lora_rank"] = f.q_lora > 0 ? nlohmann::ordered_json(f.q_lora) : nlohmann::ordered_json(nullptr);
    c["kv_lora_rank"] = f.kv_lora;
    c["qk_rope_head_dim"] = f.rope_dim;
    c["qk_nope_head_dim"] = f.nope_dim;
    c["v_head_dim"] = f.v_dim;
    c["rope_interleave"] = f.rope_interleave;
    c.erase("num_experts");
    c["n_routed_experts"] = f.experts;
    c["moe_intermediate_size"] = f.moe_intermediate;
    c["n_shared_experts"] = f.n_shared;
    c["n_group"] = f.n_group;
    c["topk_group"] = f.topk_group;
    c["routed_scaling_factor"] = f.routed_scaling_factor;
    c["norm_topk_prob"] = f.norm_topk_prob;
    c["first_k_dense_replace"] = f.first_k_dense;
    c["topk_method"] = "noaux_tc";
    c["scoring_func"] = "sigmoid";
  }
  if (f.family == "mixtral") {
    c["sliding_window"] = f.sliding_window > 0 ? nlohmann::ordered_json(f.sliding_window) : nlohmann::ordered_json(nullptr);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream out(dir + "/config.json");
  out << c.dump(2) << "\n";
  out.close();
  if (ec || !out) return absl::InternalError(absl::StrCat(dir, "/config.json: cannot write"));

  inference::RandomTensors t(f.seed, inference::DType::kBF16);
  const int64_t h = f.hidden, hd = f.head_dim, H = f.heads, KV = f.kv_heads;
  const bool mla = f.family == "deepseek_v3";
  const int64_t I = f.family == "qwen2_moe" || mla ? f.moe_intermediate : f.intermediate;
  t.Normal("model.embed_tokens.weight", {f.vocab, h}, 0.5f);
  if (!f.tie_word_embeddings) t.Normal("lm_head.weight", {f.vocab, h}, 0.1f);
  t.Normal("model.norm.weight", {h}, 0.1f, 1.0f);
  const bool qkv_bias = f.attention_bias || f.family == "qwen2_moe";
  for (int64_t l = 0; l < f.layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, "."), a = p + "self_attn.";
    t.Normal(p + "input_layernorm.weight", {h}, 0.1f, 1.0f);
    t.Normal(p + "post_attention_layernorm.weight", {h}, 0.1f, 1.0f);
    if (mla) {
      const int64_t kd = f.nope_dim + f.rope_dim;
      if (f.q_lora > 0) {
        t.Normal(a + "q_a_proj.weight", {f.q_lora, h}, 0.1f);
        t.Normal(a + "q_a_layernorm.weight", {f.q_lora}, 0.1f, 1.0f);
        t.Normal(a + "q_b_proj.weight", {H * kd, f.q_lora}, 0.15f);
      } else {
        t.Normal(a + "q_proj.weight", {H * kd, h}, 0.1f);
      }
      t.Normal(a + "kv_a_proj_with_mqa.weight", {f.kv_lora + f.rope_dim, h}, 0.1f);
      t.Normal(a + "kv_a_layernorm.weight", {f.kv_lora}, 0.1f, 1.0f);
      t.Normal(a + "kv_b_proj.weight", {H * (f.nope_dim + f.v_dim), f.kv_lora}, 0.15f);
      t.Normal(a + "o_proj.weight", {h, H * f.v_dim}, 0.05f);
    } else {
      t.Normal(a + "q_proj.weight", {H * hd, h}, 0.1f);
      t.Normal(a + "k_proj.weight", {KV * hd, h}, 0.1f);
      t.Normal(a + "v_proj.weight", {KV * hd, h}, 0.1f);
      t.Normal(a + "o_proj.weight", {h, H * hd}, 0.05f);
    }
    if (qkv_bias) {
      t.Normal(a + "q_proj.bias", {H * hd}, 0.1f);
      t.Normal(a + "k_proj.bias", {KV * hd}, 0.1f);
      t.Normal(a + "v_proj.bias", {KV * hd}, 0.1f);
    }
    if (f.attention_bias) t.Normal(a + "o_proj.bias", {h}, 0.1f);
    if (f.family == "qwen3") {  // per head
      t.Normal(a + "q_norm.weight", {hd}, 0.1f, 1.0f);
      t.Normal(a + "k_norm.weight", {hd}, 0.1f, 1.0f);
    }
    if (f.family == "olmoe") {  // over the whole projections
      t.Normal(a + "q_norm.weight", {H * hd}, 0.1f, 1.0f);
      t.Normal(a + "k_norm.weight", {KV * hd}, 0.1f, 1.0f);
    }
    const bool dense = !moe || (mla && l < f.first_k_dense) ||
                       std::find(f.mlp_only_layers.begin(), f.mlp_only_layers.end(), l) != f.mlp_only_layers.end();
    if (dense) {
      t.Normal(p + "mlp.gate_proj.weight", {f.intermediate, h}, 0.05f);
      t.Normal(p + "mlp.up_proj.weight", {f.intermediate, h}, 0.05f);
      t.Normal(p + "mlp.down_proj.weight", {h, f.intermediate}, 0.05f);
      continue;
    }
    const bool w_names = f.family == "mixtral" && f.mixtral_names;
    const std::string m = w_names ? p + "block_sparse_moe." : p + "mlp.";
    t.Normal(m + "gate.weight", {f.experts, h}, 0.1f);
    if (mla) t.Normal(m + "gate.e_score_correction_bias", {f.experts}, 0.1f);
    for (int64_t e = 0; e < f.experts; ++e) {
      const std::string q = absl::StrCat(m, "experts.", e, ".");
      t.Normal(q + (w_names ? "w1" : "gate_proj") + ".weight", {I, h}, 0.05f);
      t.Normal(q + (w_names ? "w3" : "up_proj") + ".weight", {I, h}, 0.05f);
      t.Normal(q + (w_names ? "w2" : "down_proj") + ".weight", {h, I}, 0.05f);
    }
    if (f.family == "qwen2_moe") {
      t.Normal(m + "shared_expert.gate_proj.weight", {f.shared_intermediate, h}, 0.05f);
      t.Normal(m + "shared_expert.up_proj.weight", {f.shared_intermediate, h}, 0.05f);
      t.Normal(m + "shared_expert.down_proj.weight", {h, f.shared_intermediate}, 0.05f);
      t.Normal(m + "shared_expert_gate.weight", {1, h}, 0.1f);
    }
    if (mla) {
      const int64_t Is = f.n_shared * f.moe_intermediate;
      t.Normal(m + "shared_experts.gate_proj.weight", {Is, h}, 0.05f);
      t.Normal(m + "shared_experts.up_proj.weight", {Is, h}, 0.05f);
      t.Normal(m + "shared_experts.down_proj.weight", {h, Is}, 0.05f);
    }
  }
  return t.Write(dir + "/model.safetensors");
}

}  // namespace flotilla::testing
