// A Hugging Face checkpoint's weights in host memory (f32), laid out for the CPU forward of
// its family (hf_config.h). Loaded from an HfCheckpoint by the names transformers uses; both
// expert layouts (per expert `experts.N.gate_proj/up_proj/down_proj`, Mixtral's `w1/w3/w2`,
// and transformers 5's fused `experts.gate_up_proj` / `experts.down_proj`) land in the fused
// form below. Layers past num_hidden_layers (DeepSeek-V3's MTP layer) are not read.
// Immutable once loaded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/inference/hf_config.h"

namespace flotilla::inference {

class HfCheckpoint;

struct HfLinear {
  std::vector<float> w;  // [out, in]
  std::vector<float> b;  // [out], or empty
  int out = 0, in = 0;
};

struct HfLayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [H]
  HfLinear q, k, v, o;                     // q is q_proj (MLA without q_lora too)
  std::vector<float> q_norm, k_norm;       // [head_dim] or the full projection (olmoe)
  HfLinear q_a, q_b, kv_a, kv_b;           // MLA
  std::vector<float> q_a_norm, kv_a_norm;
  HfLinear gate, up, down;                 // the dense MLP
  std::vector<float> router;               // [E, H]
  std::vector<float> score_bias;           // [E]: e_score_correction_bias (selection only)
  std::vector<float> gate_up;              // [E, 2I, H]: gate rows, then up rows
  std::vector<float> experts_down;         // [E, H, I]
  HfLinear sh_gate, sh_up, sh_down;        // the shared expert(s)
  std::vector<float> sh_gate_w;            // [H]: qwen2_moe's shared_expert_gate
};

struct HfWeights {
  HfConfig config;
  std::string source;
  std::vector<float> embed;    // [V, H]
  std::vector<float> norm;     // [H]
  std::vector<float> lm_head;  // [V, H]; empty when tied
  std::vector<HfLayerWeights> layers;
  const float* head() const { return lm_head.empty() ? embed.data() : lm_head.data(); }

  static absl::StatusOr<std::shared_ptr<const HfWeights>> Load(const HfConfig& config, const HfCheckpoint& ckpt);
};

}  // namespace flotilla::inference
