// Writes a random-init Hugging Face checkpoint folder: config.json, generation_config.json and
// model.safetensors of a small model of a family, with the vocabulary (and the tokenizer files)
// of a real tokenizer folder, so a tiny model can be served with a real tokenizer and chat
// template. Every family the loader reads: qwen3_moe, qwen3, llama, mixtral, olmoe, qwen2_moe and
// deepseek_v3, with their config knobs, in the tensor names and config fields transformers uses
// (per-expert layout as save_pretrained writes it, or transformers 5's fused layout).
//
// Weights: normal(0, std) from a seeded generator, each kind of tensor with its own std (spread, an HfInitStd;
// init_std where 0); norms 1 + normal(0, spread.norm), biases normal(0, spread.bias), so runs with one
// seed write identical files.
//
// end_probability > 0 makes the model end its turns about that often per generated token, as a
// trained model does (agent CLIs such as Claude Code and Codex treat a reply cut off at
// max_tokens as a failed turn): every embedding row gets a constant first component, which the
// residual stream carries to the final norm, and the end token's output row reads it with the
// weight that puts its logit at log(p / (1 - p) * vocab) above the near-uniform rest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "flotilla/inference/safetensors.h"

namespace flotilla::inference {

// Standard deviations of the drawn weights; 0 takes HfInitOptions::init_std.
struct HfInitStd {
  float embed = 0, lm_head = 0;
  float qkv = 0;       // q/k/v projections; deepseek_v3's q_a, kv_a and q_proj
  float o = 0;
  float latent_up = 0; // deepseek_v3's q_b and kv_b
  float mlp = 0;       // dense MLPs, experts and shared experts
  float router = 0;    // the router and qwen2_moe's shared-expert gate
  float bias = 0.1f;   // every bias and deepseek_v3's e_score_correction_bias (around 0)
  float norm = 0.1f;   // every norm weight (around 1)
};

struct HfInitOptions {
  std::string family = "qwen3_moe";  // qwen3_moe | qwen3 | llama | mixtral | olmoe | qwen2_moe | deepseek_v3
  std::string tokenizer_dir;        // tokenizer.json (+ tokenizer_config.json ...), copied; empty:
                                    // no tokenizer files (vocab_size then required, no end token)
  std::string out_dir;
  int64_t vocab_size = 0;           // 0: the tokenizer's; else at least that (padded, as Qwen3's 151936)
  int32_t hidden_size = 64;
  int32_t num_layers = 2;
  int32_t num_heads = 4;
  int32_t num_kv_heads = 2;
  int32_t head_dim = 16;
  int32_t intermediate_size = 128;      // dense MLPs; mixtral's and olmoe's experts
  int32_t num_experts = 8;              // the MoE families (deepseek_v3: n_routed_experts)
  int32_t top_k = 2;
  int32_t moe_intermediate_size = 32;   // qwen3_moe, qwen2_moe, deepseek_v3 experts
  int32_t max_position_embeddings = 40960;
  double rms_norm_eps = 1e-6;
  // config.json's rope_parameters, as JSON text (rope_type default, llama3 or yarn with their fields).
  std::string rope_parameters = R"({"rope_theta": 1000000.0, "rope_type": "default"})";
  float init_std = 0.02f;
  HfInitStd spread;
  double end_probability = 0;        // 0: untouched random weights; else in (0, 1)
  uint64_t seed = 0;
  DType dtype = DType::kBF16;
  // The experts in transformers 5's fused layout (mlp.experts.gate_up_proj [E, 2I, H],
  // mlp.experts.down_proj [E, H, I]) instead of per expert: the same values either way.
  bool fused_experts = false;
  // qwen3_moe: layers with a dense MLP (intermediate_size) instead of experts, and whether the
  // top-k weights are renormalised.
  // qwen2_moe too (its mlp_only_layers).
  std::vector<int32_t> mlp_only_layers;
  bool norm_topk_prob = true;        // qwen3_moe, qwen2_moe, olmoe, deepseek_v3 (mixtral: always)
  bool tie_word_embeddings = false;  // no lm_head.weight: the embedding is the output layer
  // llama, qwen3, qwen3_moe, olmoe: q/k/v/o biases; deepseek_v3: q_a_proj, kv_a_proj_with_mqa and
  // o_proj biases (as transformers' DeepseekV3Attention); qwen2_moe has q/k/v biases always (and
  // no o_proj bias), mixtral none.
  bool attention_bias = false;
  int32_t shared_expert_intermediate_size = 96;  // qwen2_moe: the shared expert behind its sigmoid gate
  int32_t sliding_window = 0;                    // mixtral (0: null)
  bool mixtral_names = true;  // mixtral per expert: block_sparse_moe.experts.N.w1/w3/w2 (else mlp.experts.N.*_proj)
  // deepseek_v3: latent attention (q_lora_rank 0: q_proj directly), nope + rope key heads and
  // v heads; grouped sigmoid routing (n_group, topk_group, routed_scaling_factor, an
  // e_score_correction_bias); n_shared_experts of moe_intermediate_size as one shared MLP;
  // dense layers (intermediate_size) below first_k_dense_replace.
  int32_t q_lora_rank = 48, kv_lora_rank = 32;
  int32_t qk_nope_head_dim = 32, qk_rope_head_dim = 16, v_head_dim = 24;
  bool rope_interleave = true;
  int32_t n_group = 4, topk_group = 2, n_shared_experts = 1, first_k_dense_replace = 1;
  double routed_scaling_factor = 2.5;
};

// Errors name the flag or file: an unsupported family, a tokenizer folder without
// tokenizer.json, rope_parameters that are not a JSON object, an output folder that cannot be
// written.
absl::Status WriteRandomHfModel(const HfInitOptions& options);

}  // namespace flotilla::inference
