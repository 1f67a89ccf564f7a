#include "hf/init_tensors.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace flotilla::inference {
namespace {

// The options' std for a kind of tensor: its own, or init_std where 0.
float Or(float v, float init_std) { return v > 0 ? v : init_std; }

void DrawAttention(const HfInitOptions& o, const std::string& a, RandomTensors& t) {
  const HfInitStd& sp = o.spread;
  const float s = o.init_std, qkv = Or(sp.qkv, s), out = Or(sp.o, s), up = Or(sp.latent_up, s);
  const int64_t h = o.hidden_size, H = o.num_heads, KV = o.num_kv_heads, hd = o.head_dim;
  if (o.family == "deepseek_v3") {
    const int64_t kd = o.qk_nope_head_dim + o.qk_rope_head_dim;
    if (o.q_lora_rank > 0) {
      t.Normal(a + "q_a_proj.weight", {o.q_lora_rank, h}, qkv);
      t.Normal(a + "q_a_layernorm.weight", {o.q_lora_rank}, sp.norm, 1.0f);
      t.Normal(a + "q_b_proj.weight", {H * kd, o.q_lora_rank}, up);
    } else {
      t.Normal(a + "q_proj.weight", {H * kd, h}, qkv);
    }
    t.Normal(a + "kv_a_proj_with_mqa.weight", {o.kv_lora_rank + o.qk_rope_head_dim, h}, qkv);
    t.Normal(a + "kv_a_layernorm.weight", {o.kv_lora_rank}, sp.norm, 1.0f);
    t.Normal(a + "kv_b_proj.weight", {H * (o.qk_nope_head_dim + o.v_head_dim), o.kv_lora_rank}, up);
    t.Normal(a + "o_proj.weight", {h, H * o.v_head_dim}, out);
    if (o.attention_bias) {  // transformers' DeepseekV3Attention: q_a, kv_a and o take attention_bias
      if (o.q_lora_rank > 0) t.Normal(a + "q_a_proj.bias", {o.q_lora_rank}, sp.bias);
      t.Normal(a + "kv_a_proj_with_mqa.bias", {o.kv_lora_rank + o.qk_rope_head_dim}, sp.bias);
      t.Normal(a + "o_proj.bias", {h}, sp.bias);
    }
    return;
  }
  t.Normal(a + "q_proj.weight", {H * hd, h}, qkv);
  t.Normal(a + "k_proj.weight", {KV * hd, h}, qkv);
  t.Normal(a + "v_proj.weight", {KV * hd, h}, qkv);
  t.Normal(a + "o_proj.weight", {h, H * hd}, out);
  const bool bias = o.attention_bias && o.family != "mixtral";  // Mixtral has none
  if (bias || o.family == "qwen2_moe") {
    t.Normal(a + "q_proj.bias", {H * hd}, sp.bias);
    t.Normal(a + "k_proj.bias", {KV * hd}, sp.bias);
    t.Normal(a + "v_proj.bias", {KV * hd}, sp.bias);
  }
  if (bias && o.family != "qwen2_moe") t.Normal(a + "o_proj.bias", {h}, sp.bias);
  if (o.family == "qwen3" || o.family == "qwen3_moe") {  // per head
    t.Normal(a + "q_norm.weight", {hd}, sp.norm, 1.0f);
    t.Normal(a + "k_norm.weight", {hd}, sp.norm, 1.0f);
  }
  if (o.family == "olmoe") {  // over the whole projections
    t.Normal(a + "q_norm.weight", {H * hd}, sp.norm, 1.0f);
    t.Normal(a + "k_norm.weight", {KV * hd}, sp.norm, 1.0f);
  }
}

void DrawMlp(const std::string& m, int64_t inner, int64_t h, float s, RandomTensors& t) {
  t.Normal(m + "gate_proj.weight", {inner, h}, s);
  t.Normal(m + "up_proj.weight", {inner, h}, s);
  t.Normal(m + "down_proj.weight", {h, inner}, s);
}

void DrawMoe(const HfInitOptions& o, const std::string& p, RandomTensors& t) {
  const HfInitStd& sp = o.spread;
  const float mlp = Or(sp.mlp, o.init_std), router = Or(sp.router, o.init_std);
  const int64_t h = o.hidden_size, E = o.num_experts;
  const bool deepseek = o.family == "deepseek_v3";
  const int64_t I = o.family == "mixtral" || o.family == "olmoe" ? o.intermediate_size : o.moe_intermediate_size;
  const bool w_names = o.family == "mixtral" && o.mixtral_names && !o.fused_experts;
  const std::string m = w_names ? p + "block_sparse_moe." : p + "mlp.";
  t.Normal(m + "gate.weight", {E, h}, router);
  if (deepseek) t.Normal(m + "gate.e_score_correction_bias", {E}, sp.bias);
  std::vector<std::string> gate_up, down;
  for (int64_t e = 0; e < E; ++e) {
    const std::string q = absl::StrCat(m, "experts.", e, ".");
    const std::string g = q + (w_names ? "w1" : "gate_proj") + ".weight", u = q + (w_names ? "w3" : "up_proj") + ".weight",
                      d = q + (w_names ? "w2" : "down_proj") + ".weight";
    t.Normal(g, {I, h}, mlp);
    t.Normal(u, {I, h}, mlp);
    t.Normal(d, {h, I}, mlp);
    gate_up.insert(gate_up.end(), {g, u});
    down.push_back(d);
  }
  if (o.fused_experts) {
    t.Concat(gate_up, m + "experts.gate_up_proj", {E, 2 * I, h});
    t.Concat(down, m + "experts.down_proj", {E, h, I});
  }
  if (o.family == "qwen2_moe") {
    DrawMlp(m + "shared_expert.", o.shared_expert_intermediate_size, h, mlp, t);
    t.Normal(m + "shared_expert_gate.weight", {1, h}, router);
  }
  if (deepseek) DrawMlp(m + "shared_experts.", static_cast<int64_t>(o.n_shared_experts) * I, h, mlp, t);
}

}  // namespace

bool HfInitDenseLayer(const HfInitOptions& o, int32_t l) {
  if (o.family == "llama" || o.family == "qwen3") return true;
  if (o.family == "deepseek_v3") return l < o.first_k_dense_replace;
  return std::find(o.mlp_only_layers.begin(), o.mlp_only_layers.end(), l) != o.mlp_only_layers.end();
}

void DrawHfTensors(const HfInitOptions& o, int64_t vocab, RandomTensors& t) {
  const HfInitStd& sp = o.spread;
  const float s = o.init_std;
  const int64_t h = o.hidden_size;
  t.Normal("model.embed_tokens.weight", {vocab, h}, Or(sp.embed, s));
  if (!o.tie_word_embeddings) t.Normal("lm_head.weight", {vocab, h}, Or(sp.lm_head, s));
  t.Normal("model.norm.weight", {h}, sp.norm, 1.0f);
  for (int32_t l = 0; l < o.num_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    t.Normal(p + "input_layernorm.weight", {h}, sp.norm, 1.0f);
    t.Normal(p + "post_attention_layernorm.weight", {h}, sp.norm, 1.0f);
    DrawAttention(o, p + "self_attn.", t);
    if (HfInitDenseLayer(o, l)) {
      DrawMlp(p + "mlp.", o.intermediate_size, h, Or(sp.mlp, s), t);
    } else {
      DrawMoe(o, p, t);
    }
  }
}

}  // namespace flotilla::inference
