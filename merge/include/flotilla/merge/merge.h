// `flotilla merge`: combines checkpoints tensor by tensor into a new model folder.
//
// The parents are read memory-mapped and merged one computation unit at a time (a tensor, or
// one expert's slice of a stacked expert tensor, so both Hugging Face expert layouts and
// Flotilla's give the same result); the pages of each unit are released as soon as it is
// written, so resident memory stays near a few units, not a model. The output folder holds
// model.safetensors (or model-0000K-of-0000N.safetensors shards under a size cap, with
// model.safetensors.index.json), the base's config.json and tokenizer files, and
// merge_provenance.json: the recipe's text and the sha256 of every parent's safetensors files.
//
// Parents must agree with the base: the same shape-relevant config.json fields, the same tensor
// names and shapes, identical tokenizer files; otherwise the merge is refused with an error
// naming the model and the field, tensor or file. Not thread-safe; one merge per call.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flotilla/merge/merge_config.h"

namespace flotilla::merge {

struct MergeOptions {
  uint64_t max_shard_bytes = 5ull << 30;  // a tensor larger than this gets a shard to itself
  bool overwrite = false;                 // replace an existing non-empty output folder
  // Called after each tensor with the output bytes written so far and the total.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct MergeResult {
  std::string weights_path;  // the single shard, or the index when sharded
  std::vector<std::string> shards;
  uint64_t tensors = 0;
  uint64_t units = 0;        // computation units (tensors, or expert slices)
  uint64_t bytes_written = 0;
};

absl::StatusOr<MergeResult> RunMerge(const MergeConfig& config, const std::string& out_dir,
                                     const MergeOptions& options = {});

// experiment.yaml's `policy.init: merge:CONFIG.yaml`: runs the merge into `out_dir` (replacing
// what a previous start left there) and returns the merged single-file weights the trainer
// starts from. Any other spec is returned unchanged.
absl::StatusOr<std::string> ResolveMergeInit(const std::string& init_spec, const std::string& out_dir);

}  // namespace flotilla::merge
