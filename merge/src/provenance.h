// merge_provenance.json: what a merged model was made from: the recipe's path and text, the
// method, and for the base and each model its path and the sha256 of each of its safetensors
// files (hashed with read(2) in 1 MiB blocks: the page cache, not the process, holds them).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint.h"
#include "flotilla/merge/merge_config.h"

namespace flotilla::merge {

absl::StatusOr<std::string> Sha256File(const std::string& path);

absl::Status WriteProvenance(const MergeConfig& config, const Checkpoint* base,
                             const std::vector<const Checkpoint*>& models, const std::vector<std::string>& shards,
                             const std::string& out_path);

}  // namespace flotilla::merge
