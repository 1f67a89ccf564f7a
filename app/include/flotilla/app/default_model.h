// The embedded default model: a small random-init MoE (the engine's default ModelConfig),
// written as PREFIX.safetensors + PREFIX.json in C++, so serving works on a fresh machine
// without the trainer's Python. A trainer later replaces it by publishing real weights.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "flotilla/inference/model_config.h"

namespace flotilla::app {

// Writes `config` with deterministic random weights (normal, `stddev`; norm weights near 1) to
// PREFIX.safetensors and PREFIX.json, creating PREFIX's folder. PermissionDenied or the
// writer's error naming the file when it cannot be written.
absl::Status WriteDefaultModel(const std::string& prefix, const inference::ModelConfig& config = {},
                               uint64_t seed = 0, float stddev = 0.02f);

}  // namespace flotilla::app
