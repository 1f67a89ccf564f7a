// Writes a model's tensors as safetensors shards while they are being computed: the whole
// layout (names, shapes, dtypes, shard boundaries under a size cap) is fixed up front, each
// shard's header is written when the shard is opened, and tensor data is appended in plan
// order a slice at a time, converted from f32 to the tensor's dtype. Nothing but the current
// slice is held in memory. One shard is named model.safetensors; several are
// model-0000K-of-0000N.safetensors with model.safetensors.index.json. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "flotilla/common/status.h"
#include "flotilla/inference/safetensors.h"

namespace flotilla::merge {

struct PlannedTensor {
  std::string name;
  std::vector<int64_t> shape;
  inference::DType dtype = inference::DType::kF32;
};

class ShardWriter {
 public:
  ShardWriter(std::string dir, std::vector<PlannedTensor> plan, uint64_t max_shard_bytes);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends the next `count` values of the plan's current tensor (tensors in plan order, each
  // tensor's elements in order).
  absl::Status Append(const float* values, size_t count);
  // Checks every planned byte was written, closes the last shard and writes the index.
  absl::Status Finish();

  const std::vector<std::string>& shard_paths() const { return paths_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  absl::Status OpenShard(size_t shard);

  std::string dir_;
  std::vector<PlannedTensor> plan_;
  std::vector<size_t> shard_of_;  // per planned tensor
  std::vector<std::string> paths_;
  size_t tensor_ = 0;            // current tensor
  uint64_t written_in_tensor_ = 0;  // elements
  int fd_ = -1;
  size_t open_shard_ = SIZE_MAX;
  uint64_t bytes_written_ = 0;
  std::vector<uint16_t> bf16_;
};

}  // namespace flotilla::merge
