// Writes a random-init Hugging Face checkpoint folder: config.json, generation_config.json and
// model.safetensors of a small model of a family, with the vocabulary (and the tokenizer files)
// of a real tokenizer folder, so a tiny model can be served with a real tokenizer and chat
// template. Families: qwen3_moe and qwen3 (per-expert layout, as transformers saves them).
//
// Weights: normal(0, init_std) from a seeded generator; norms 1 + normal(0, 0.1), so runs with
// one seed write identical files.
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

struct HfInitOptions {
  std::string family = "qwen3_moe";
  std::string tokenizer_dir;        // tokenizer.json (+ tokenizer_config.json ...), copied; empty:
                                    // no tokenizer files (vocab_size then required, no end token)
  std::string out_dir;
  int64_t vocab_size = 0;           // 0: the tokenizer's; else at least that (padded, as Qwen3's 151936)
  int32_t hidden_size = 64;
  int32_t num_layers = 2;
  int32_t num_heads = 4;
  int32_t num_kv_heads = 2;
  int32_t head_dim = 16;
  int32_t intermediate_size = 128;      // qwen3 (dense MLP)
  int32_t num_experts = 8;              // qwen3_moe
  int32_t top_k = 2;
  int32_t moe_intermediate_size = 32;
  int32_t max_position_embeddings = 40960;
  float init_std = 0.02f;
  double end_probability = 0;        // 0: untouched random weights; else in (0, 1)
  uint64_t seed = 0;
  DType dtype = DType::kBF16;
  // The experts in transformers 5's fused layout (mlp.experts.gate_up_proj [E, 2I, H],
  // mlp.experts.down_proj [E, H, I]) instead of per expert: the same values either way.
  bool fused_experts = false;
  // qwen3_moe: layers with a dense MLP (intermediate_size) instead of experts, and whether the
  // top-k weights are renormalised.
  std::vector<int32_t> mlp_only_layers;
  bool norm_topk_prob = true;
  bool tie_word_embeddings = false;  // no lm_head.weight: the embedding is the output layer
};

// Errors name the flag or file: an unsupported family, a tokenizer folder without
// tokenizer.json, an output folder that cannot be written.
absl::Status WriteRandomHfModel(const HfInitOptions& options);

}  // namespace flotilla::inference
