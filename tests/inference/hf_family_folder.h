// Small random Hugging Face folders of every family for the gpu tests, written by the library's
// WriteRandomHfModel (hf_init.h, `flotilla model init`): FamilyOptions gives the tests' shape
// (vocabulary 4096, hidden 128, 3 layers, 4 heads over 2 KV heads of 32, bf16, RoPE theta
// 10000), projections drawn large enough that attention and routing are far from uniform,
// norm weights 1 + normal(0, 0.1) and biases normal(0, 0.1), so neither is at its default.
#pragma once

#include <string>

#include "flotilla/inference/hf_init.h"

namespace flotilla::testing {

inline inference::HfInitOptions FamilyOptions(const std::string& family, uint64_t seed = 1) {
  inference::HfInitOptions o;
  o.family = family;
  o.vocab_size = 4096;
  o.hidden_size = 128;
  o.num_layers = 3;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.head_dim = 32;
  o.intermediate_size = 160;
  o.num_experts = 8;
  o.top_k = 2;
  o.moe_intermediate_size = 48;
  o.shared_expert_intermediate_size = 96;
  o.norm_topk_prob = false;
  o.max_position_embeddings = 4096;
  o.rope_parameters = R"({"rope_theta": 10000.0, "rope_type": "default"})";
  o.spread = {.embed = 0.5f, .lm_head = 0.1f, .qkv = 0.1f, .o = 0.05f, .latent_up = 0.15f, .mlp = 0.05f,
              .router = 0.1f, .bias = 0.1f, .norm = 0.1f};
  o.dtype = inference::DType::kBF16;
  o.seed = seed;
  return o;
}

// Writes the folder of `o` into dir.
inline absl::Status WriteFamilyFolder(inference::HfInitOptions o, const std::string& dir) {
  o.out_dir = dir;
  return inference::WriteRandomHfModel(o);
}

}  // namespace flotilla::testing
