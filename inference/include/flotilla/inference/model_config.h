// The model, defined once by a config. JSON form is shared with the Python reference
// (trainer_bridge/python/flotilla_trainer/model.py).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::inference {

struct ModelConfig {
  int32_t vocab_size = 272;
  int32_t n_layers = 4;
  int32_t d_model = 256;
  int32_t n_heads = 4;
  int32_t n_kv_heads = 4;
  int32_t head_dim = 64;
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  int32_t n_experts = 8;
  int32_t top_k = 2;
  int32_t n_shared_experts = 1;
  int32_t expert_hidden = 256;
  int32_t max_context = 4096;
  int32_t sliding_window = 0;             // 0: none
  std::vector<int32_t> sliding_layers;    // layers that use the sliding window
  bool tie_embeddings = false;

  // Number of MoE layers (every layer is MoE) times top_k: the routing width per token.
  int32_t routing_width() const { return n_layers * top_k; }
  uint64_t parameter_count() const;

  static absl::StatusOr<ModelConfig> FromJson(const std::string& json);
  std::string ToJson() const;
  // Checks the config is self-consistent (heads * head_dim, top_k <= n_experts, ...).
  absl::Status Validate() const;
};

}  // namespace flotilla::inference
