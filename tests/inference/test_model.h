// Shared helpers for the inference tests: small model configs, random models written through
// the real safetensors writer, and the PyTorch reference run as a subprocess.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/inference/model_config.h"
#include "flotilla/inference/safetensors.h"
#include "testing/shell.h"
#include "weights.h"

namespace flotilla::inference::testing {

// Two layers, GQA (4 query heads over 2 KV heads), one sliding-window layer.
inline ModelConfig TinyConfig() {
  ModelConfig c;
  c.n_layers = 2;
  c.d_model = 64;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.n_experts = 4;
  c.top_k = 2;
  c.expert_hidden = 64;
  c.max_context = 512;
  c.sliding_window = 6;
  c.sliding_layers = {1};
  return c;
}

inline absl::Status WriteRandomModel(const std::string& path, const ModelConfig& c, uint64_t seed,
                                     float stddev, DType dtype = DType::kF32) {
  auto w = ModelWeights::Random(c, seed, stddev, 0);
  ModelWeights copy = *w;
  std::vector<TensorToWrite> out;
  for (const TensorSlot& s : TensorSlots(copy)) out.push_back({s.name, s.shape, s.dst->data(), dtype});
  return WriteSafetensors(path, out);
}

inline std::string SourceDir() {
  const char* s = std::getenv("FLOTILLA_SOURCE_DIR");
  return s == nullptr ? "." : s;
}

// Runs the PyTorch reference tool; returns stdout, or nullopt when it failed.
inline std::optional<std::string> RunReference(const std::string& args) {
  std::string cmd = "FLOTILLA_SOURCE_DIR='" + SourceDir() + "' /usr/bin/python3 '" + SourceDir() +
                    "/tests/inference/reference_tool.py' " + args;
  int status = 0;
  std::string out = flotilla::testing::RunShell(cmd, &status);
  if (status != 0) return std::nullopt;
  return out;
}

}  // namespace flotilla::inference::testing
