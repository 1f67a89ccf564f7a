// One parent of a merge: a folder (Hugging Face: model.safetensors or shards with
// model.safetensors.index.json; Flotilla: model.safetensors or one vN.safetensors, with an
// optional config.json) or a single .safetensors file, every file memory-mapped.
//
// Tensor views point into the mappings and stay valid for the object's lifetime. Release()
// hands a range's pages back to the kernel (they are re-read from the file if touched again),
// which is what keeps a streaming merge's resident memory near one unit. Not thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/inference/safetensors.h"
#include "nlohmann/json.hpp"

namespace flotilla::merge {

class Checkpoint {
 public:
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // The folder holding config.json and the tokenizer files (the file's folder for a file).
  const std::string& folder() const { return folder_; }
  bool is_folder() const { return is_folder_; }
  // config.json, or null when there is none.
  const nlohmann::json& config() const { return config_; }
  // Tensor names in file order (the shards' order, then offsets within each).
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<std::string>& files() const { return files_; }
  // nullptr when absent.
  const inference::TensorView* Find(const std::string& name) const;

  // Copies `count` elements starting at `offset` of a tensor into f32 `out`.
  void ReadF32(const inference::TensorView& t, size_t offset, size_t count, float* out) const;
  // Drops the resident pages of the tensor's element range [offset, offset+count).
  void Release(const inference::TensorView& t, size_t offset, size_t count) const;

 private:
  Checkpoint() = default;
  std::string path_;
  std::string folder_;
  bool is_folder_ = false;
  nlohmann::json config_;
  std::vector<std::unique_ptr<inference::SafetensorsFile>> mapped_;
  std::vector<std::string> files_;
  std::vector<std::string> names_;
  std::map<std::string, const inference::TensorView*> tensors_;
};

}  // namespace flotilla::merge
