// A Hugging Face checkpoint folder (config.json + model.safetensors or its sharded index),
// loaded for the engine's CPU backend in f32, and teacher-forced scoring over it: what
// `flotilla model logprobs` prints. Immutable after Load; Score may run from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/inference/hf_config.h"

namespace flotilla::inference {

struct HfWeights;
class ThreadPool;

struct HfScore {
  // For t in [0, n-1): log p(ids[t+1] | ids[0..t]) and the argmax of that distribution.
  std::vector<float> logprob;
  std::vector<int32_t> top1;
  // n x num_moe_layers x top_k: each token's experts in every MoE layer (selection order, best
  // first). With replay, exactly the replayed ids.
  std::vector<int32_t> experts;
};

class HfModel {
 public:
  // Reads config.json (family semantics, hf_config.h) and the tensors (memory-mapped, widened
  // to f32, FP8 dequantized). Errors name the file and the field or tensor.
  static absl::StatusOr<std::unique_ptr<HfModel>> Load(const std::string& dir);
  ~HfModel();

  const HfConfig& config() const;
  // Runs ids through the CPU backend in one prefill. `replay`: empty, or n x num_moe_layers x
  // top_k expert ids to use instead of the router's choice (routing replay).
  absl::StatusOr<HfScore> Score(const std::vector<int32_t>& ids, const std::vector<int32_t>& replay = {},
                                int threads = 1) const;

 private:
  HfModel() = default;
  std::shared_ptr<const HfWeights> weights_;
};

}  // namespace flotilla::inference
