// A Hugging Face checkpoint's config.json, read with each family's semantics: one struct that
// says, per layer, how attention, the MLP / MoE block and the router compute. Families:
// llama, qwen3 (dense), qwen3_moe, qwen2_moe, mixtral, olmoe, deepseek_v3.
// Errors name config.json and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::inference {

enum class HfFamily { kLlama, kQwen3, kQwen3Moe, kQwen2Moe, kMixtral, kOlmoe, kDeepseekV3 };

// RoPE as config.json's rope_parameters (transformers 5) or rope_theta + rope_scaling.
struct HfRope {
  std::string type = "default";  // default | linear | llama3 | yarn
  double theta = 10000.0;
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double original_max_position = 0;                       // llama3, yarn (0: absent)
  double beta_fast = 32.0, beta_slow = 1.0;               // yarn
  double mscale = 0, mscale_all_dim = 0;                  // yarn (0: absent)
  double attention_factor = -1;                           // yarn (< 0: derived)
  bool truncate = true;                                   // yarn
};

enum class QkNorm { kNone, kPerHead, kFull };
enum class Router { kSoftmax, kSigmoidGrouped };

struct HfConfig {
  std::string model_type;
  HfFamily family = HfFamily::kLlama;
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;            // q/k/v head size (MLA: see below)
  int32_t intermediate_size = 0;   // the dense MLP's
  float rms_norm_eps = 1e-6f;
  int32_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;           // biases on q, k, v
  bool o_bias = false;
  QkNorm qk_norm = QkNorm::kNone;
  int32_t sliding_window = 0;      // 0: none (all layers)

  // MoE: which layers route, and how.
  int32_t num_experts = 0;
  int32_t top_k = 0;
  int32_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  std::vector<bool> moe_layer;     // per layer
  Router router = Router::kSoftmax;
  int32_t shared_intermediate_size = 0;  // 0: no shared expert
  bool shared_expert_gate = false;       // qwen2_moe's sigmoid gate on the shared expert
  int32_t n_group = 1, topk_group = 1;
  float routed_scaling_factor = 1.0f;

  // DeepSeek-V3's multi-head latent attention.
  bool mla = false;
  int32_t q_lora_rank = 0;         // 0: q_proj directly (config null)
  int32_t kv_lora_rank = 0;
  int32_t qk_rope_head_dim = 0;
  int32_t qk_nope_head_dim = 0;
  int32_t v_head_dim = 0;
  bool rope_interleave = false;    // rotate pairs (2i, 2i+1) instead of halves

  HfRope rope;

  // Derived: per-head sizes of the KV cache and attention.
  int32_t k_head_dim() const { return mla ? qk_nope_head_dim + qk_rope_head_dim : head_dim; }
  int32_t v_dim() const { return mla ? v_head_dim : head_dim; }
  int32_t kv_heads() const { return mla ? num_heads : num_kv_heads; }
  int32_t rope_dim() const { return mla ? qk_rope_head_dim : head_dim; }
  int32_t num_moe_layers() const;
  // The rotary inverse frequencies (rope_dim()/2 of them) and the factor on cos/sin, as
  // transformers computes them for this rope type.
  void RopeTables(std::vector<double>* inv_freq, double* attention_factor) const;
  // The softmax scale of q·k.
  double attention_scale() const;

  // Parses config.json's text; `source` names the file in errors.
  static absl::StatusOr<HfConfig> FromJson(const std::string& text, const std::string& source);
  static absl::StatusOr<HfConfig> FromDir(const std::string& dir);
};

}  // namespace flotilla::inference
