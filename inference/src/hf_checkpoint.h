// A Hugging Face checkpoint folder's tensors: model.safetensors, or the shards that
// model.safetensors.index.json names, each memory-mapped for the object's lifetime (the
// SafetensorsFile owners). Read() widens one tensor to f32 from F32, BF16, F16, or F8_E4M3 with
// its 128x128 block scales (`<name>_scale_inv`, DeepSeek-V3's format), checking the shape.
// Errors name the tensor and the file. Immutable after Open: concurrent reads are safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flotilla/inference/safetensors.h"

namespace flotilla::inference {

class HfCheckpoint {
 public:
  static absl::StatusOr<std::unique_ptr<HfCheckpoint>> Open(const std::string& dir);

  bool Has(const std::string& name) const { return where_.count(name) > 0; }
  // The file that holds `name` (or, when absent, the file that would: the index or the single file).
  std::string FileOf(const std::string& name) const;
  // The tensor as stored (any dtype, memory-mapped); its shape must be `shape`. Valid for the
  // object's lifetime.
  absl::StatusOr<const TensorView*> View(const std::string& name, const std::vector<int64_t>& shape) const;
  // The tensor, f32, row-major; its shape must be `shape`.
  absl::Status Read(const std::string& name, const std::vector<int64_t>& shape, std::vector<float>* out) const;
  const std::string& dir() const { return dir_; }

 private:
  HfCheckpoint() = default;
  std::string dir_;
  std::string listing_;  // model.safetensors or model.safetensors.index.json
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<const SafetensorsFile*, const TensorView*>> where_;
};

}  // namespace flotilla::inference
