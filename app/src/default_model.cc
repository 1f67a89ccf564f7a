#include "flotilla/app/default_model.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/safetensors.h"
#include "weights.h"

namespace flotilla::app {

absl::Status WriteDefaultModel(const std::string& prefix, const inference::ModelConfig& config, uint64_t seed,
                               float stddev) {
  RETURN_IF_ERROR(Annotate(config.Validate(), "embedded default model"));
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(prefix).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(parent.string(), ": ", ec.message()));
  // The engine's own random initialisation, written through the engine's safetensors writer:
  // the same tensor names and shapes the engine checks on load.
  inference::ModelWeights weights = *inference::ModelWeights::Random(config, seed, stddev, 0);
  std::vector<inference::TensorToWrite> tensors;
  for (const inference::TensorSlot& s : inference::TensorSlots(weights)) {
    tensors.push_back({s.name, s.shape, s.dst->data(), inference::DType::kF32});
  }
  const std::string weights_path = prefix + ".safetensors";
  RETURN_IF_ERROR(Annotate(inference::WriteSafetensors(weights_path, tensors), weights_path));
  const std::string config_path = prefix + ".json";
  std::ofstream out(config_path, std::ios::trunc);
  out << config.ToJson();
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrCat(config_path, ": cannot be written"));
  return absl::OkStatus();
}

}  // namespace flotilla::app
