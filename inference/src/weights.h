// A model's weights in host memory (f32), loaded from safetensors and checked against the
// config: every expected tensor present with the exact shape, no unexpected tensor, dtype F32
// or BF16 (BF16 is widened). Immutable once loaded: backends share it read-only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/inference/model_config.h"

namespace flotilla::inference {

struct LayerWeights {
  std::vector<float> attn_norm;  // [D]
  std::vector<float> wq;         // [H*hd, D]
  std::vector<float> wk;         // [KVH*hd, D]
  std::vector<float> wv;         // [KVH*hd, D]
  std::vector<float> wo;         // [D, H*hd]
  std::vector<float> ffn_norm;   // [D]
  std::vector<float> router;     // [E, D]
  std::vector<float> w1, w3;     // [E, F, D]
  std::vector<float> w2;         // [E, D, F]
  std::vector<float> s1, s3;     // [S, F, D]
  std::vector<float> s2;         // [S, D, F]
};

struct ModelWeights {
  ModelConfig config;
  int64_t version = 0;
  std::string source;
  std::vector<float> embed;    // [V, D]
  std::vector<float> norm;     // [D]
  std::vector<float> lm_head;  // [V, D]; empty when tied
  std::vector<LayerWeights> layers;

  const float* head() const { return config.tie_embeddings ? embed.data() : lm_head.data(); }

  // Loads and checks `path`; errors name the file and the tensor.
  static absl::StatusOr<std::shared_ptr<const ModelWeights>> Load(const ModelConfig& config,
                                                                  const std::string& path,
                                                                  int64_t version);
  // Deterministic random weights (the benchmark's large configs; tests).
  static std::shared_ptr<const ModelWeights> Random(const ModelConfig& config, uint64_t seed,
                                                    float stddev, int64_t version);
};

class SafetensorsFile;

// Opens `path` and checks it against `config` exactly as ModelWeights::Load does (every expected
// tensor present with the exact shape, none unexpected, every value finite) without widening
// anything: for backends that convert straight from the file's bytes.
absl::StatusOr<std::unique_ptr<SafetensorsFile>> OpenCheckedWeights(const ModelConfig& config,
                                                                    const std::string& path);

// Every tensor a config needs: name, shape, and where it lives in `w`.
struct TensorSlot {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float>* dst;
};
std::vector<TensorSlot> TensorSlots(ModelWeights& w);

}  // namespace flotilla::inference
