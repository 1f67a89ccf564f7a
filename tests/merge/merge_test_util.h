// Small checkpoints for the merge tests: parents built from a seeded generator, in Hugging Face
// folders (model.safetensors, config.json, tokenizer.json) or as Flotilla's single files.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "flotilla/inference/safetensors.h"
#include "gtest/gtest.h"

namespace flotilla::merge::fixtures {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
using TensorMap = std::map<std::string, Tensor>;

inline size_t Numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t s : shape) n *= static_cast<size_t>(s);
  return n;
}

// Names and shapes of a small MoE in Hugging Face names: fused experts in layer 0, one tensor
// per expert in layer 1, a router with a correction bias, shared experts, norms, embeddings.
inline std::map<std::string, std::vector<int64_t>> HfLayout() {
  return {{"model.embed_tokens.weight", {32, 16}},
          {"model.layers.0.input_layernorm.weight", {16}},
          {"model.layers.0.self_attn.q_proj.weight", {16, 16}},
          {"model.layers.0.self_attn.o_proj.weight", {16, 16}},
          {"model.layers.0.mlp.gate.weight", {4, 16}},
          {"model.layers.0.mlp.gate.e_score_correction_bias", {4}},
          {"model.layers.0.mlp.experts.gate_up_proj", {4, 16, 16}},
          {"model.layers.0.mlp.experts.down_proj", {4, 16, 8}},
          {"model.layers.0.mlp.shared_experts.up_proj.weight", {8, 16}},
          {"model.layers.1.post_attention_layernorm.weight", {16}},
          {"model.layers.1.self_attn.k_proj.weight", {8, 16}},
          {"model.layers.1.mlp.gate.weight", {4, 16}},
          {"model.layers.1.mlp.experts.0.up_proj.weight", {8, 16}},
          {"model.layers.1.mlp.experts.3.down_proj.weight", {16, 8}},
          {"model.layers.1.mlp.shared_expert_gate.weight", {1, 16}},
          {"model.norm.weight", {16}},
          {"lm_head.weight", {32, 16}}};
}

// Flotilla's names (inference/src/weights.cc): stacked [E, F, D] experts and shared experts.
inline std::map<std::string, std::vector<int64_t>> FlotillaLayout() {
  std::map<std::string, std::vector<int64_t>> m = {{"embed.weight", {32, 16}}, {"norm.weight", {16}},
                                                   {"lm_head.weight", {32, 16}}};
  for (int l = 0; l < 2; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    m[p + "attn_norm.weight"] = {16};
    m[p + "attn.wq"] = {16, 16};
    m[p + "attn.wo"] = {16, 16};
    m[p + "ffn_norm.weight"] = {16};
    m[p + "moe.router"] = {4, 16};
    m[p + "moe.experts.w1"] = {4, 8, 16};
    m[p + "moe.experts.w2"] = {4, 16, 8};
    m[p + "moe.shared.w1"] = {1, 8, 16};
  }
  return m;
}

inline TensorMap Gaussian(const std::map<std::string, std::vector<int64_t>>& layout, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  TensorMap out;
  for (const auto& [name, shape] : layout) {
    Tensor t{shape, std::vector<float>(Numel(shape))};
    for (float& v : t.values) v = scale * dist(rng);
    out[name] = std::move(t);
  }
  return out;
}

// a + s * b, tensor by tensor.
inline TensorMap Plus(const TensorMap& a, const TensorMap& b, float s) {
  TensorMap out = a;
  for (auto& [name, t] : out) {
    for (size_t i = 0; i < t.values.size(); ++i) t.values[i] += s * b.at(name).values[i];
  }
  return out;
}

inline void WriteTensors(const TensorMap& m, const std::string& path) {
  std::vector<inference::TensorToWrite> w;
  for (const auto& [name, t] : m) w.push_back({name, t.shape, t.values.data(), inference::DType::kF32});
  ASSERT_TRUE(inference::WriteSafetensors(path, w).ok()) << path;
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// A Hugging Face-style folder: model.safetensors, config.json, tokenizer.json.
inline void WriteHfFolder(const TensorMap& m, const std::string& dir,
                          const std::string& config = R"({"model_type": "deepseek_v3", "hidden_size": 16, "n_routed_experts": 4, "vocab_size": 32})",
                          const std::string& tokenizer = R"({"model": {"type": "BPE", "vocab": {"a": 0}}})") {
  std::filesystem::create_directories(dir);
  WriteTensors(m, dir + "/model.safetensors");
  WriteText(dir + "/config.json", config);
  WriteText(dir + "/tokenizer.json", tokenizer);
}

inline TensorMap ReadTensors(const std::string& path) {
  TensorMap out;
  auto f = inference::SafetensorsFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return out;
  for (const auto& [name, v] : (*f)->tensors()) {
    Tensor t{v.shape, std::vector<float>(static_cast<size_t>(v.numel()))};
    for (size_t i = 0; i < t.values.size(); ++i) {
      if (v.dtype == inference::DType::kF32) {
        std::memcpy(&t.values[i], v.data + 4 * i, 4);
      } else {
        uint16_t b;
        std::memcpy(&b, v.data + 2 * i, 2);
        t.values[i] = inference::Bf16ToF32(b);
      }
    }
    out[name] = std::move(t);
  }
  return out;
}

}  // namespace flotilla::merge::fixtures
